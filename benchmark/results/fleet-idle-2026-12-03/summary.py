"""Per strategy: goodput by the p99 inter-token gap and by the mean TPOT,
TTFT and tokens/s percentiles, requests and tokens/s p50 by GPU class.
usage: python3 summary.py FILE.tsv..."""
import sys, collections, statistics as st
rows=collections.defaultdict(list); heads=[]
for f in sys.argv[1:]:
  for line in open(f):
    if line.startswith('#'): heads.append(line.strip()); continue
    s,seed,gpu,out,prompt,tok,cached,arr,ttft,tpot,itl,e2e=line.rstrip('\n').split('\t')
    rows[s].append(dict(seed=int(seed),gpu=int(gpu),ok=out=='ok',tok=int(tok),ttft=float(ttft),tpot=float(tpot),itl=float(itl)))
def q(v,p):
  v=sorted(v); 
  if not v: return float('nan')
  k=p*(len(v)-1); i=int(k); f=k-i
  return v[i] if i+1>=len(v) else v[i]*(1-f)+v[i+1]*f
cls=lambda g: ['h100','h100','a100','a100','a40','a40'][g] if g>=0 else 'none'
for h in heads: print(h)
print("strategy n good(itl99) good(tpot) ttft p50 p90 p99 | tok/s p5 p50 | served by class | tok/s p50 by class | ttft p99 by class")
for s,r in rows.items():
  n=len(r)
  g1=sum(1 for x in r if x['ok'] and x['ttft']<=2000 and (x['tok']<2 or x['itl']<=100))/n
  g2=sum(1 for x in r if x['ok'] and x['ttft']<=2000 and (x['tok']<2 or x['tpot']<=100))/n
  t=[x['ttft'] for x in r if x['ok']]
  tps=[1000/x['tpot'] for x in r if x['ok'] and x['tok']>=2 and x['tpot']>0]
  bycls=collections.Counter(cls(x['gpu']) for x in r)
  pc={c:q([1000/x['tpot'] for x in r if cls(x['gpu'])==c and x['tok']>=2 and x['tpot']>0],.5) for c in ['h100','a100','a40']}
  tc={c:q([x['ttft'] for x in r if cls(x['gpu'])==c],.99) for c in ['h100','a100','a40']}
  print(f"{s} {n} {g1:.3f} {g2:.3f} {q(t,.5):.0f} {q(t,.9):.0f} {q(t,.99):.0f} | {q(tps,.05):.1f} {q(tps,.5):.1f} | {dict(bycls)} | "+" ".join(f"{c}:{v:.1f}" for c,v in pc.items())+" | "+" ".join(f"{c}:{v:.0f}" for c,v in tc.items()))
