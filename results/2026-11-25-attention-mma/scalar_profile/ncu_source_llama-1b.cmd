ncu -i /root/out/full_llama-1b.ncu-rep --page source --csv --print-source sass
