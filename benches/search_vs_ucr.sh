#!/usr/bin/env bash
# timewarp search against the UCR Suite's UCR_DTW on the same data: a random
# walk of N points (default 10^6) and a query of 128 cut from another walk,
# bands 5% and 10%. Checks that both find the same location and distances
# within 1e-9 relative, and prints both times.
#
#   benches/search_vs_ucr.sh PATH/TO/UCR_DTW [N] [TIMEWARP]
#
# UCR_DTW is the peer's binary, built from its published source (UCR_DTW.cpp,
# Rakthanmanon et al., KDD 2012; not part of this repository) outside the
# repository with `g++ -O3`. Its stock output prints the distance with 6
# significant digits; to check 1e-9, build it with the distance printed in
# full, e.g.:
#   sed 's/cout << "Location : "/cout.precision(17); cout << "Location : "/' \
#       UCR_DTW.cpp > UCR_DTW_p17.cpp && g++ -O3 -o UCR_DTW UCR_DTW_p17.cpp
# With 6 digits, the distances are compared to the digits printed.
#
# UCR_DTW reads text (one value a line) and its time includes parsing it;
# timewarp reads the same values as raw f64 (`.f64`): both times are
# printed as each program reports its own, and as wall-clock time. timewarp
# uses every core; `RAYON_NUM_THREADS=1` is also timed for the comparison
# with the single-threaded peer.
set -euo pipefail
peer=${1:?usage: $0 PATH/TO/UCR_DTW [N] [TIMEWARP]}
n=${2:-1000000}
timewarp=${3:-target/release/timewarp}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

python3 - "$work" "$n" <<'EOF'
import random, struct, sys
work, n = sys.argv[1], int(sys.argv[2])
rng = random.Random(46)
def walk(length):
    v, out = 0.0, []
    for _ in range(length):
        v += rng.gauss(0.0, 1.0)
        out.append(v)
    return out
series, query = walk(n), walk(128)
# repr() round-trips: the text and the binary hold the same doubles.
with open(f"{work}/series.txt", "w") as f:
    f.write("\n".join(repr(v) for v in series) + "\n")
with open(f"{work}/series.f64", "wb") as f:
    f.write(struct.pack(f"<{n}d", *series))
with open(f"{work}/query.txt", "w") as f:
    f.write("\n".join(repr(v) for v in query) + "\n")
EOF

now() { date +%s.%N; }
status=0
for band in 0.05 0.10; do
    start=$(now)
    peer_out=$("$peer" "$work/series.txt" "$work/query.txt" 128 "$band" 2>/dev/null)
    peer_wall=$(echo "$(now) - $start" | bc)
    start=$(now)
    ours=$("$timewarp" search "$work/query.txt" "$work/series.f64" --band "$band" 2>"$work/stats")
    our_wall=$(echo "$(now) - $start" | bc)
    start=$(now)
    RAYON_NUM_THREADS=1 "$timewarp" search "$work/query.txt" "$work/series.f64" --band "$band" \
        >/dev/null 2>"$work/stats1"
    one_wall=$(echo "$(now) - $start" | bc)

    peer_loc=$(sed -n 's/^Location : //p' <<<"$peer_out")
    peer_dist=$(sed -n 's/^Distance : //p' <<<"$peer_out")
    peer_time=$(sed -n 's/^Total Execution Time : \([0-9.e+-]*\).*/\1/p' <<<"$peer_out")
    read -r our_loc our_dist < <(sed -n '2s/,/ /p' <<<"$ours")
    our_time=$(sed -n 's/^time: \([0-9.]*\) s.*/\1/p' "$work/stats")
    one_time=$(sed -n 's/^time: \([0-9.]*\) s.*/\1/p' "$work/stats1")
    verdict=$(python3 - "$peer_loc" "$peer_dist" "$our_loc" "$our_dist" <<'EOF'
import sys
peer_loc, peer_dist, our_loc, our_dist = sys.argv[1:]
digits = len(peer_dist.replace(".", "").replace("-", "").split("e")[0].lstrip("0"))
tolerance = max(1e-9, 0.5 * 10 ** (1 - digits)) if digits < 16 else 1e-9
relative = abs(float(peer_dist) - float(our_dist)) / max(abs(float(peer_dist)), 1e-300)
same = peer_loc == our_loc and relative <= tolerance
print(f"{'same' if same else 'DIFFERENT'} (relative difference {relative:.2e}, tolerance {tolerance:.0e})")
EOF
)
    [[ $verdict == same* ]] || status=1
    echo "band $band, N = $n, query 128"
    echo "  UCR_DTW : location $peer_loc, distance $peer_dist; $peer_time s its own timer, ${peer_wall} s wall"
    echo "  timewarp: location $our_loc, distance $our_dist; $our_time s search (all cores), ${our_wall} s wall;" \
        "$one_time s on one thread (${one_wall} s wall)"
    echo "  answer: $verdict"
    sed 's/^/  timewarp /' "$work/stats" | sed -n '2p'
done
exit "$status"
