ncu -i /root/out/full_llama-8b.ncu-rep --page details
