/work/main/bundle/roseinfer run /root/out/prompts32.jsonl --device cuda --model llama-1b --quantize q4_k --max-tokens 64 --ignore-eos --max-num-seqs 32 -o /root/out/tokens_roseinfer_32.jsonl
