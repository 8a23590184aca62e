#!/bin/bash
# ab.sh MODEL PRECISION STEPS N
for i in $(seq 1 $4); do for s in 0 1; do /work/main/build/crossover train $1 --precision $2 --shards $s --steps $3 --checkpoint-every off -q --json s.json >/dev/null 2>&1; /usr/bin/python3 -c "import json;j=json.load(open('s.json'));print('$s', j['shards'], round(j['median_step_ms'],4))"; done; done > ab-$1-$2.txt
/usr/bin/python3 -c "
import statistics as st
d={}; sh={}
for l in open('ab-$1-$2.txt'):
  k,n,v=l.split(); d.setdefault(k,[]).append(float(v)); sh[k]=n
a=d['0']; b=d['1']
print('$1 $2: default (%s shards) %.4f ms, 1 shard %.4f ms, pairwise 1-shard/default median %.3f (%d pairs)' % (sh['0'], st.median(a), st.median(b), st.median([y/x for x,y in zip(a,b)]), len(a)))"
