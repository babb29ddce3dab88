"""shares.py: the tolerance of a share of samples, for the e2e tests' Python
checks; the same figures as lib.sh's share_tol and share_near.

A share p (percent) of n samples scatters around the truth by its binomial
error, sigma = sqrt(p(1-p)/n) (the workloads take their calls in a random
order, so their samples are independent draws: tests/README.md); a check
allows Z sigmas and SLACK points (the workload's clock reads, rounding), and
against another profiler's share of n2 samples of the same run, both errors.
"""
import math

Z = 4.0
SLACK = 0.5


def tol(p, n, n2=0):
    """the tolerance in points of a share p (percent) of n samples"""
    q = min(max(p / 100.0, 0.0), 1.0)
    v = (1.0 / n if n > 0 else 0.0) + (1.0 / n2 if n2 > 0 else 0.0)
    pq = q * (1 - q)
    if n > 0 and pq < 1.0 / n:
        pq = 1.0 / n  # a share of 0 or 100% still scatters by a sample
    return Z * 100 * math.sqrt(pq * v) + SLACK


def check(what, got, want, n, n2=0):
    """(True, what) when the share GOT of N samples is WANT within tol, else
    (False, why): WHAT with the count and how many sigmas off, either way"""
    if not isinstance(got, (int, float)):
        return False, "%s: no share (%r)" % (what, got)
    t = tol(want, n, n2)
    sg = (t - SLACK) / Z
    off = abs(got - want) / sg if sg > 0 else 0.0
    counts = "%d%s samples" % (n, " and %d" % n2 if n2 else "")
    if abs(got - want) > t:
        return False, "%s: tally says %.2f%% of %s, expected %.2f%% +/- %.2f (%.1f sigma off)" % (
            what, got, counts, want, t, off)
    return True, "%s: %.2f%% of %s, expected %.2f%% +/- %.2f (%.1f sigma)" % (what, got, counts, want, t, off)
