# Folds `perf script -F comm,tid,ip,sym` output: share of samples under a function, and what it spends them on.
# usage: python3 bench/perf_fold.py perf-script.txt ANCHOR_SUBSTRING [depth]
# prints: total samples; share of samples whose stack contains ANCHOR; breakdown by the frame(s) directly under ANCHOR
import sys, collections, re
path, anchor = sys.argv[1], sys.argv[2]
depth = int(sys.argv[3]) if len(sys.argv) > 3 else 1
samples, cur = [], []
for line in open(path, errors='replace'):
    if not line.strip():
        if cur: samples.append(cur); cur = []
        continue
    if line.startswith('\t') or line.startswith(' '):
        parts = line.strip().split(' ', 1)
        cur.append(parts[1] if len(parts) > 1 else '?')
    else:
        if cur: samples.append(cur)
        cur = []
if cur: samples.append(cur)
tot = len(samples)
def short(s):
    s = re.sub(r'<([^<>]*)>', lambda m: '<' + m.group(1) + '>', s)
    return s[:150]
inside = [s for s in samples if any(anchor in f for f in s)]
print(f"total samples {tot}; containing '{anchor}': {len(inside)} ({100*len(inside)/tot:.1f}%)")
below = collections.Counter()
selfc = collections.Counter()
for s in inside:
    # s[0] is leaf; find outermost anchor frame (highest index)
    idx = max(i for i, f in enumerate(s) if anchor in f)
    chain = s[max(0, idx - depth):idx][::-1]
    key = ' > '.join(short(f) for f in chain) if chain else '(self)'
    below[key] += 1
    selfc[short(s[0])] += 1
print("-- directly under anchor (share of all samples):")
for k, v in below.most_common(25): print(f"{100*v/tot:6.1f}%  {k}")
print("-- leaf functions inside anchor:")
for k, v in selfc.most_common(15): print(f"{100*v/tot:6.1f}%  {k}")
