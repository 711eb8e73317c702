"""Per strategy: requests missing the goodput SLO, by cause and GPU class.
usage: python3 misses.py FILE.tsv"""
import sys, collections
cls=lambda g: ['h100','h100','a100','a100','a40','a40'][g] if g>=0 else 'none'
c=collections.defaultdict(collections.Counter)
for line in open(sys.argv[1]):
    if line.startswith('#'): continue
    s,seed,gpu,out,prompt,tok,cached,arr,ttft,tpot,itl,e2e=line.rstrip('\n').split('\t')
    k=cls(int(gpu))
    if out!='ok': c[s]['refused']+=1; continue
    t=float(ttft)>2000; i=int(tok)>=2 and float(itl)>100
    if t: c[s]['ttft:'+k]+=1
    if i and not t: c[s]['itl:'+k]+=1
for s,v in c.items(): print(s, dict(v))
