#!/usr/bin/env python3
"""Write allocation traces for comparing heapdelta's Pool with CPython's allocator.

usage: make_traces.py OUTDIR [--quick] [--seed N]

Every trace is deterministic for a given --seed. The format is the one of
tests/data/pymalloc/SPEC.md: "a ID SIZE", "f ID", "r ID SIZE", "s LABEL", "# comment".

Families (the numbers are the default run; --quick writes a smaller subset):
  fuzz       random malloc/free/realloc with phase-varying size mixes, sizes 0 and > 512,
             heap targets that grow and shrink (arena churn)
  scattered  N allocations of a CPython-like size mix, then 99% freed in random order
  compact    the same, but the 1% survivors are the first allocated
  allfree    N allocations, all freed in random order
  training   per-step temporaries freed at the end of the step, a few leaks per step,
             periodic bursts of many temporaries
  stress     phases with different size mixes, heap targets, free orders (LIFO, FIFO,
             random) and realloc rates; freed ids are reused
  churn      512-byte-heavy arena churn with a snapshot after every operation
  edge       hand-made cases: realloc across the 512-byte boundary and within a class
             (the 75% rule), realloc needing a new arena before the old block is freed,
             the arena descriptor vector growing past 16/32/64/128, arenas released
             pool by pool, alloc-all/free-all rounds, small random traces snapshotted
             after nearly every operation
"""
import argparse
import bisect
import os
import random
from multiprocessing import Pool

SMALL = 512                                  # larger requests bypass the pools
BLOCKS_PER_POOL = {16: 1021, 64: 255, 256: 63, 512: 31}
POOLS_PER_ARENA = 64

# Request sizes loosely resembling CPython objects on 64-bit, with weights.
MIX = [(16, 2), (24, 6), (32, 10), (48, 12), (56, 8), (64, 10), (72, 6), (80, 5), (96, 5),
       (112, 4), (128, 4), (160, 3), (192, 3), (232, 3), (256, 2), (320, 2), (384, 1),
       (448, 1), (512, 1)]


class Trace:
    def __init__(self, comment):
        self.lines = [f"# {comment}"]

    def a(self, i, n): self.lines.append(f"a {i} {n}")
    def f(self, i): self.lines.append(f"f {i}")
    def r(self, i, n): self.lines.append(f"r {i} {n}")
    def s(self, label): self.lines.append(f"s {label}")


def sampler(rng, sizes):
    """A function drawing request sizes: "mix" (MIX weights) or a fixed size."""
    if sizes != "mix":
        return lambda: sizes
    cum, total = [], 0
    for _, w in MIX:
        total += w
        cum.append(total)
    return lambda: MIX[bisect.bisect_right(cum, rng.random() * total)][0]


class LiveSet:
    """Live ids with O(1) insert, random removal and random choice."""
    def __init__(self, rng):
        self.rng, self.ids = rng, []

    def __len__(self): return len(self.ids)
    def add(self, i): self.ids.append(i)
    def choice(self): return self.rng.choice(self.ids)

    def pop_random(self):
        j = self.rng.randrange(len(self.ids))
        self.ids[j], self.ids[-1] = self.ids[-1], self.ids[j]
        return self.ids.pop()


# ---- random families ------------------------------------------------------------------------

def fuzz(t, rng, ops, snap_every):
    live, nid = LiveSet(rng), 0
    for k in range(ops):
        if k % 50_000 == 0:                      # new phase: heap target and size range
            target = rng.choice([1_000, 20_000, 150_000, 400_000])
            lo, hi = rng.choice([(1, 64), (1, 512), (200, 512), (1, 700)])
        p_alloc = 0.75 if len(live) < target else 0.25
        x = rng.random()
        if not live or x < p_alloc:
            t.a(nid, 0 if rng.random() < 0.001 else rng.randint(lo, hi))
            live.add(nid)
            nid += 1
        elif x < p_alloc + 0.05:
            t.r(live.choice(), rng.randint(0, 600))
        else:
            t.f(live.pop_random())
        if (k + 1) % snap_every == 0:
            t.s(f"op_{k + 1}")


def scattered(t, rng, n, sizes, survivors="random"):
    """n allocations, then everything freed in random order except 1% (or none) survivors."""
    draw = sampler(rng, sizes)
    for i in range(n):
        t.a(i, draw())
    t.s("peak")
    keep = {"random": set(rng.sample(range(n), round(n * 0.01))),
            "first": set(range(round(n * 0.01))), "none": set()}[survivors]
    order = [i for i in range(n) if i not in keep]
    rng.shuffle(order)
    for k, i in enumerate(order, 1):
        t.f(i)
        if k % max(1, len(order) // 4) == 0 and k < len(order):
            t.s(f"freed_{k * 100 // len(order)}pct")
    t.s("end")


def training(t, rng, steps, temps, leak, spike_every, spike_temps, snap_every, sizes="mix"):
    draw = sampler(rng, sizes)
    next_id, free_ids = 0, []                    # ids of freed temporaries are reused
    t.s("start")
    for step in range(1, steps + 1):
        n = temps + (spike_temps if step % spike_every == 0 else 0)
        leak_at = set(rng.sample(range(n), min(leak, n)))
        temps_live = []
        for k in range(n):
            if free_ids:
                i = free_ids.pop()
            else:
                i, next_id = next_id, next_id + 1
            t.a(i, draw())
            if k not in leak_at:
                temps_live.append(i)
            if temps_live and rng.random() < 0.25:   # some temporaries die early
                j = temps_live.pop(rng.randrange(len(temps_live)))
                t.f(j)
                free_ids.append(j)
        for j in reversed(temps_live):           # the rest die at the end of the step
            t.f(j)
            free_ids.append(j)
        if step % snap_every == 0:
            t.s(f"step_{step}")
    t.s("end")


def stress(t, rng, ops, snap_every):
    live, free_ids, nid, next_phase = [], [], 0, 0
    mixes = [(512, 512), (449, 512), (1, 16), (497, 512), (385, 512), (1, 512), (200, 700),
             (1, 64), (240, 260), (0, 1000)]
    for k in range(ops):
        if k >= next_phase:
            next_phase = k + rng.choice([3000, 10000, 30000, 60000])
            target = rng.choice([0, 10, 300, 2000, 6000, 20000, 60000, 120000])
            lo, hi = rng.choice(mixes)
            order = rng.choice(["random", "lifo", "fifo"])
            p_realloc = rng.choice([0.02, 0.1, 0.3])
        p_alloc = 0.9 if len(live) < target else 0.1
        x = rng.random()
        if not live or x < p_alloc:
            if free_ids and rng.random() < 0.7:
                i = free_ids.pop(rng.randrange(len(free_ids)))
            else:
                i, nid = nid, nid + 1
            t.a(i, rng.randint(lo, hi))
            live.append(i)
        elif x < p_alloc + p_realloc:
            t.r(rng.choice(live), rng.choice([rng.randint(lo, hi), rng.randint(0, 600), 0, 512, 513, 1]))
        else:
            if order == "lifo":
                i = live.pop()
            elif order == "fifo":                # oldest first (near-oldest once the heap is big)
                i = live.pop(0 if len(live) < 5000 else rng.randrange(50))
            else:
                j = rng.randrange(len(live))
                live[j], live[-1] = live[-1], live[j]
                i = live.pop()
            t.f(i)
            free_ids.append(i)
        if (k + 1) % snap_every == 0:
            t.s(f"k{k + 1}")


def churn(t, rng, ops):
    """Large blocks, heap swinging between a few arenas and almost nothing, snapshot every op."""
    live, nid, grow = LiveSet(rng), 0, True
    sizes = rng.choice([(512, 512), (481, 512), (385, 512), (250, 512)])
    for k in range(ops):
        if k % 4000 == 0:
            grow = not grow
            target = rng.randint(1, 6) * POOLS_PER_ARENA * 31 if grow else rng.randint(0, 500)
        p_alloc = 0.85 if len(live) < target else 0.15
        x = rng.random()
        if not live or x < p_alloc:
            t.a(nid, rng.randint(*sizes))
            live.add(nid)
            nid += 1
        elif x < p_alloc + 0.05:
            t.r(live.choice(), rng.choice([rng.randint(*sizes), rng.randint(1, SMALL), 0, 600]))
        else:
            t.f(live.pop_random())
        t.s(k)


def rand_everyop(t, rng, ops):
    """Small random trace, snapshot after every third op and whenever the heap is nearly empty."""
    live, nid = LiveSet(rng), 0
    sizes = rng.choice([(512, 512), (385, 512), (1, 512), (1, 600), (200, 520), (16, 16)])
    for k in range(ops):
        if k % 1500 == 0:
            target = rng.choice([50, 2000, 5000, 9000])
        p_alloc = 0.7 if len(live) < target else 0.3
        x = rng.random()
        if not live or x < p_alloc:
            t.a(nid, 0 if rng.random() < 0.01 else rng.randint(*sizes))
            live.add(nid)
            nid += 1
        elif x < p_alloc + 0.1:
            t.r(live.choice(), rng.choice([0, rng.randint(1, 600), rng.randint(*sizes)]))
        else:
            t.f(live.pop_random())
        if k % 3 == 0 or len(live) < 3:
            t.s(f"k{k}")


# ---- hand-made edge cases -------------------------------------------------------------------

def per_arena(size):
    return POOLS_PER_ARENA * BLOCKS_PER_POOL[size]


def realloc_512_boundary(t, rng):
    """Small -> raw -> small and back, including reallocs to and from size 0."""
    cases = [(500, 600, 400), (512, 513, 512), (513, 512, 16), (1, 513, 1), (300, 10000, 20),
             (0, 10, 600), (0, 0, 0), (600, 0, 5), (16, 0, 16), (512, 0, 512), (100, 700, 0)]
    for k, (n0, n1, n2) in enumerate(cases):
        t.a(k, n0); t.s(f"a{k}")
        t.r(k, n1); t.s(f"r1_{k}")
        t.r(k, n2); t.s(f"r2_{k}")
    t.s("end")


def realloc_same_class(t, rng):
    """Shrinking stays in place only while the new size is above 75% of the block size."""
    cases = [(100, 97), (112, 84), (112, 85), (16, 13), (16, 12), (16, 1), (100, 112), (100, 113),
             (512, 385), (512, 384), (512, 512), (48, 37), (48, 36), (33, 25), (33, 24), (32, 33),
             (500, 497), (200, 150), (64, 49), (64, 48)]
    for k, (n0, n1) in enumerate(cases):
        for j in range(3):                       # neighbours in the same pool
            t.a(1000 + 3 * k + j, n0)
        t.a(k, n0)
        t.r(k, n1); t.s(f"c{k}_{n0}_to_{n1}")
        t.r(k, n0); t.s(f"c{k}_back")
    for j in range(3 * len(cases)):
        t.f(1000 + j)
    t.s("end")


def realloc_new_before_free(t, rng):
    """A realloc that moves allocates the new block before freeing the old one: with every arena
    full, it takes a new arena even though the free would have emptied a pool."""
    for i in range(per_arena(512)):
        t.a(i, 512)
    t.s("one_full_arena")
    for i in range(31):
        t.f(i)                                   # pool 0 empty
    t.s("pool0_empty")
    for i in range(31, 61):
        t.f(i)                                   # pool 1 keeps id 61 only
    t.s("pool1_single")
    for i in range(63):
        t.a(100_000 + i, 256)                    # pool 0 reused for class 256, and filled
    t.s("arena_full_again")
    t.r(61, 16)
    t.s("after_realloc_move")
    t.r(62, 100)
    t.s("after_realloc2")


def id_reuse(t, rng):
    for rnd in range(50):
        for i in range(40):
            t.a(i, (i * 37 + rnd * 11) % 530)
        for i in range(0, 40, 2):
            t.f(i)
        for i in range(0, 40, 2):
            t.a(i, (i * 13 + rnd) % 700)
        for i in range(0, 40, 3):
            t.r(i, (i * 7 + rnd * 5) % 520 + 1)
        for i in range(40):
            t.f(i)
        t.s(f"round{rnd}")


def arena_churn(t, rng, size):
    """Grow to 17, 33, 65, 130 arenas (the descriptor vector doubles past 16), free every other
    arena completely and all but one block of the rest, then free those too."""
    nid = 0
    per = per_arena(size)
    for narenas in (17, 33, 65, 130):
        ids = list(range(nid, nid + narenas * per))
        nid += len(ids)
        for i in ids:
            t.a(i, size)
        t.s(f"alloc_{narenas}")
        for ai in range(narenas):
            keep = 1 if ai % 2 == 0 else 0
            for i in ids[ai * per + keep:(ai + 1) * per]:
                t.f(i)
            if ai in (0, 1, 2, narenas - 1):
                t.s(f"n{narenas}_after_arena{ai}")
        t.s(f"half_freed_{narenas}")
        for ai in range(0, narenas, 2):
            t.f(ids[ai * per])
        t.s(f"all_freed_{narenas}")


def alloc_all_free_all(t, rng):
    for rnd in range(12):
        n = rng.choice([1, 31, 32, 1984, 1985, 5000, 3 * 1984 + 7, 20000])
        size = rng.choice([16, 512, 256, 64, None])          # None: random sizes
        for i in range(n):
            t.a(i, size or rng.randint(1, SMALL))
        t.s(f"r{rnd}_peak_n{n}")
        order = list(range(n))
        if rnd % 3 == 0:
            rng.shuffle(order)
        elif rnd % 3 == 1:
            order.reverse()
        for k, i in enumerate(order):
            t.f(i)
            if k == n // 2:
                t.s(f"r{rnd}_half")
        t.s(f"r{rnd}_empty")


def snap_after_release(t, rng):
    """Five full arenas of 512-byte blocks emptied pool by pool in random order, with a snapshot
    after each pool empties and now and then a refill with other classes."""
    narenas = 5
    for i in range(narenas * per_arena(512)):
        t.a(i, 512)
    t.s("full")
    pools = [range(p * 31, (p + 1) * 31) for p in range(narenas * POOLS_PER_ARENA)]
    rng.shuffle(pools)
    for pi, pool in enumerate(pools):
        for i in pool:
            t.f(i)
        t.s(f"pool{pi}_emptied")
        if pi % 40 == 0:
            for j in range(31):
                t.a(10 ** 6 + pi * 31 + j, 16 + (pi % 30) * 16)
            t.s(f"refill{pi}")


# ---- what to write --------------------------------------------------------------------------

def plan(quick):
    """(file name, generator, arguments after (trace, rng)) for every trace to write."""
    jobs = [(f"edge_{g.__name__}", g, ()) for g in (realloc_512_boundary, realloc_same_class,
            realloc_new_before_free, id_reuse, alloc_all_free_all, snap_after_release)]
    jobs += [(f"edge_arena_churn_{size}", arena_churn, (size,)) for size in (512, 256)]
    if quick:
        jobs += [(f"fuzz_{i}", fuzz, (ops, snap)) for i, (ops, snap) in
                 enumerate([(500, 7), (20_000, 100), (200_000, 5000)])]
        jobs += [(f"{mode}_{n}", scattered, (n, "mix", surv)) for n in (1000, 50_000)
                 for mode, surv in [("scattered", "random"), ("compact", "first"), ("allfree", "none")]]
        jobs += [("training_0", training, (60, 300, 3, 10, 20_000, 2))]
        jobs += [(f"stress_{i}", stress, (ops, snap)) for i, (ops, snap) in
                 enumerate([(20_000, 7), (100_000, 50)])]
        jobs += [(f"churn_{i}", churn, (10_000,)) for i in range(2)]
        jobs += [(f"rand_everyop_{i}", rand_everyop, (3000,)) for i in range(4)]
        return jobs
    jobs += [(f"fuzz_{i}", fuzz, (ops, snap)) for i, (ops, snap) in enumerate(
        [(150, 3), (400, 7), (1000, 50), (3000, 100), (10_000, 500), (30_000, 1000),
         (60_000, 3000), (100_000, 5000), (200_000, 10_000), (300_000, 10_000), (600_000, 20_000),
         (600_000, 20_000), (1_000_000, 25_000), (1_500_000, 50_000)])]
    for n in (1000, 20_000, 300_000):
        for mode, surv in [("scattered", "random"), ("compact", "first"), ("allfree", "none")]:
            jobs.append((f"{mode}_{n}", scattered, (n, "mix", surv)))
        jobs.append((f"scattered64_{n}", scattered, (n, 64)))
    for size in (1, 16, 100, 385, 500, 512):
        jobs.append((f"scattered_size{size}", scattered, (50_000, size)))
        jobs.append((f"training_size{size}", training, (120, 700, 3, 30, 40_000, 3, size)))
    jobs += [(f"training_{i}", training, args) for i, args in enumerate(
        [(100, 200, 2, 10, 5000, 5), (300, 1000, 3, 50, 50_000, 20),
         (60, 3000, 10, 7, 30_000, 3), (500, 500, 1, 100, 100_000, 25)])]
    jobs += [(f"stress_{i}", stress, (ops, snap)) for i, (ops, snap) in
             enumerate([(20_000, 7), (100_000, 50), (300_000, 200), (1_000_000, 1000)] * 3)]
    jobs += [(f"churn_{i}", churn, (40_000,)) for i in range(6)]
    jobs += [(f"rand_everyop_{i}", rand_everyop, (ops,)) for i, ops in
             enumerate([2000, 6000, 15000] * 8)]
    return jobs


def write(job):
    outdir, seed, (name, gen, args) = job
    # Each trace has its own generator, seeded from the run seed and its name.
    rng = random.Random(f"{seed}/{name}")
    t = Trace(f"{gen.__name__}{args} seed={seed}")
    gen(t, rng, *args)
    with open(os.path.join(outdir, name + ".trace"), "w") as f:
        f.write("\n".join(t.lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("outdir")
    ap.add_argument("--quick", action="store_true", help="a small set (a few seconds)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    os.makedirs(args.outdir, exist_ok=True)
    jobs = plan(args.quick)
    with Pool() as pool:
        pool.map(write, [(args.outdir, args.seed, j) for j in jobs], chunksize=1)
    print(f"wrote {len(jobs)} traces to {args.outdir}")


if __name__ == "__main__":
    main()
