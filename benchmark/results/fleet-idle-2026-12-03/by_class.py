"""Per strategy and GPU class: share of requests, tokens/s p50, mean
requests decoding per GPU, median of the requests p99 inter-token gap.
usage: python3 by_class.py FILE.tsv"""
import sys, collections
cls=lambda g: ['h100','h100','a100','a100','a40','a40'][g] if g>=0 else 'none'
def q(v,p):
  v=sorted(v); k=p*(len(v)-1); i=int(k); f=k-i
  return v[i] if i+1>=len(v) else v[i]*(1-f)+v[i+1]*f
R=collections.defaultdict(lambda: collections.defaultdict(list)); span=collections.defaultdict(float)
for line in open(sys.argv[1]):
  if line.startswith('#'): continue
  s,seed,gpu,out,prompt,tok,cached,arr,ttft,tpot,itl,e2e=line.rstrip('\n').split('\t')
  if out!='ok': continue
  g=int(gpu); R[s][cls(g)].append((int(tok),float(tpot),float(ttft),float(e2e),float(itl)))
  span[(s,int(seed))]=max(span[(s,int(seed))], float(arr)+float(e2e))
print("| strategy | class | share | tok/s p50 | decoding per GPU (mean) | ITL p99 per request, median ms |")
print("|---|---|---|---|---|---|")
for s in R:
  T=sum(v for (ss,_),v in span.items() if ss==s)
  n=sum(len(v) for v in R[s].values())
  for c in ['h100','a100','a40']:
    rs=R[s][c]
    dec=sum(e2e-ttft for tok,tpot,ttft,e2e,itl in rs)/T/2
    tps=[1000/tp for tok,tp,_,_,_ in rs if tok>=2 and tp>0]
    print(f"| {s} | {c} | {100*len(rs)/n:.1f}% | {q(tps,.5):.1f} | {dec:.1f} | {q([x[4] for x in rs if x[0]>=2],.5):.0f} |")
