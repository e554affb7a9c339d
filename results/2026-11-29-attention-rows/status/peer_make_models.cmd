python3 .peers/make_models.py /tmp/models gpt2 llama1b
