"""Goodput (TTFT <= 2 s and the request's p99 inter-token gap <= 100 ms, as
llm-bench compare counts it), TTFT p90/p99 and per-request tokens/s p5/p50
of every strategy in a probe TSV, with 95 % two-level bootstrap intervals
(seeds drawn with replacement, then each drawn seed's requests), and each
ratio of BASE over the others paired on the same seed draws.

usage: python3 bootstrap.py FILE.tsv [BASE] [REPLICATES]"""
import collections
import random
import sys

data = collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(sys.argv[1]):
    if line.startswith('#'):
        continue
    s, seed, gpu, out, prompt, tok, cached, arr, ttft, tpot, itl, e2e = line.rstrip('\n').split('\t')
    ok = out == 'ok'
    data[s][int(seed)].append((ok, float(ttft) if ok else 1e9, float(tpot), float(itl), int(tok)))


def pct(v, p):
    v = sorted(v)
    k = p / 100 * (len(v) - 1)
    i = int(k)
    f = k - i
    return v[i] if i + 1 >= len(v) else v[i] * (1 - f) + v[i + 1] * f


def metrics(rows):
    tt = [r[1] for r in rows]
    good = sum(1 for r in rows if r[0] and r[1] <= 2000 and (r[4] < 2 or r[3] <= 100)) / len(rows)
    tps = [1000 / r[2] for r in rows if r[4] >= 2 and r[2] > 0]
    return dict(good=good, p90=pct(tt, 90), p99=pct(tt, 99), tps5=pct(tps, 5), tps50=pct(tps, 50))


seeds = sorted(next(iter(data.values())).keys())
strats = list(data.keys())
base = sys.argv[2] if len(sys.argv) > 2 else 'predicted'
reps = int(sys.argv[3]) if len(sys.argv) > 3 else 400
rng = random.Random(7)
boots = {s: collections.defaultdict(list) for s in strats}
for _ in range(reps):
    drawn = [rng.choice(seeds) for _ in seeds]
    for s in strats:
        rows = []
        for k in drawn:
            rows += rng.choices(data[s][k], k=len(data[s][k]))
        for m, v in metrics(rows).items():
            boots[s][m].append(v)
point = {s: metrics([r for k in seeds for r in data[s][k]]) for s in strats}
ms = ['good', 'p90', 'p99', 'tps5', 'tps50']
fmt = {'good': lambda x: f"{100 * x:.1f}%", 'p90': lambda x: f"{x:.0f}", 'p99': lambda x: f"{x:.0f}",
       'tps5': lambda x: f"{x:.1f}", 'tps50': lambda x: f"{x:.1f}"}
print("| strategy | good | TTFT p90 ms | TTFT p99 ms | tok/s p5 | tok/s p50 |\n|---|---|---|---|---|---|")
for s in strats:
    cells = [f"{fmt[m](point[s][m])} [{fmt[m](pct(boots[s][m], 2.5))}, {fmt[m](pct(boots[s][m], 97.5))}]" for m in ms]
    print(f"| {s} | " + " | ".join(cells) + " |")
print(f"\n| {base} over | goodput | TTFT p90 | TTFT p99 | tok/s p5 | tok/s p50 |\n|---|---|---|---|---|---|")
for s in strats:
    if s == base:
        continue
    cells = []
    for m in ms:
        r = [a / b for a, b in zip(boots[base][m], boots[s][m])]
        cells.append(f"{point[base][m] / point[s][m]:.3f} [{pct(r, 2.5):.3f}, {pct(r, 97.5):.3f}]")
    print(f"| {s} | " + " | ".join(cells) + " |")
