ncu -i /root/out/norm.ncu-rep --page details
