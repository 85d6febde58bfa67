#!/bin/sh
# A stand-in "binary": counts to $COUNT_TO (default 20000) in the shell.
n=${COUNT_TO:-20000}
i=0
while [ $i -lt $n ]; do i=$((i+1)); done
echo "counted to $n"
