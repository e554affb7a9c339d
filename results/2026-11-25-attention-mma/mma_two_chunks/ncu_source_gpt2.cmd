ncu -i /root/out/full_gpt2.ncu-rep --page source --csv --print-source sass
