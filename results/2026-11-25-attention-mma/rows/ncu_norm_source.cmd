ncu -i /root/out/norm.ncu-rep --page source --csv --print-source sass
