module loadgen

go 1.22
