ncu -i /root/out/full_llama-8b.ncu-rep --page source --csv --print-source sass
