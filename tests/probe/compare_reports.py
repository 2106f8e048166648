#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""compare_reports.py CTF.json JSON.json PERFETTO.json: `lowkey report --json` of one run's CTF
trace and of its JSON and Perfetto conversions must agree: the same rows in the same order, the
same counts, spans, counters, threads and lost events, the same percentiles of wall and thread CPU
time to the formats' resolution (JSON and Perfetto time each event to the nanosecond, truncated:
a duration within 1 ns; 2 are allowed), and with --sched the same split of the spans' time and the
same switches (JSON has no switch out without its switch in: up to one fewer a thread, and so no
thread that had nothing else).
With --runs, three runs of one program, each recorded in its format (lk_trace_start's): the same
rows with the same counts, and threads with the same names and event counts.
With --converted CTF.json OTHER.json FORMAT [json]: one conversion of the CTF trace (through any
formats) into FORMAT, compared as above; a last argument "json" when the conversions went through
JSON (its allowance for switches).
With --converted-list CTF.json LIST: the same for each line "OTHER.json FORMAT [json]" of the file
LIST, in one run.
Exits 1 with what differs."""
import json
import sys

NS = 2.0  # the formats' resolution: each end of an interval within 1 ns


def close(a, b, tol):
    """Within tol, and within what --json's 6 significant digits round away."""
    if a is None or b is None:
        return a == b
    return abs(a - b) <= tol + 1e-5 * abs(a)


def compare(ctf, other, name, via_json=None):
    bad = []
    if via_json is None:
        via_json = name == "json"

    def check(cond, what):
        if not cond:
            bad.append(f"{name}: {what}")

    for k in ("procname", "pid", "events", "lost", "cputime", "sched"):
        check(ctf[k] == other[k], f"{k} {other[k]!r} != CTF's {ctf[k]!r}")
    check(other["format"] == name, f"format {other['format']}")
    if name == "ctf":
        check(other["truncated_streams"] == ctf["truncated_streams"], "truncated_streams differ")
    else:
        check(other["truncated_streams"] is None, "truncated_streams is not null")
    rows = [(c["provider"], c["event"], c["kind"]) for c in ctf["classes"]]
    check(rows == [(c["provider"], c["event"], c["kind"]) for c in other["classes"]],
          f"rows {[(c['provider'], c['event'], c['kind']) for c in other['classes']]} != CTF's {rows}")
    for a, b in zip(ctf["classes"], other["classes"]):
        row = f"{a['provider']}:{a['event']} ({a['kind']})"
        for k in ("count", "spans", "min", "max", "last"):
            check(a.get(k) == b.get(k), f"{row} {k} {b.get(k)} != CTF's {a.get(k)}")
        for clock, tol in (("wall_ns", NS), ("cpu_ns", 0.5)):
            for p in ("p50", "p99", "max"):
                x, y = a.get(clock, {}).get(p), b.get(clock, {}).get(p)
                check(close(x, y, tol), f"{row} {clock} {p} {y} != CTF's {x}")
        if "split" in a:
            tol = NS * (a["spans"] + ctf["switches"])
            for k in a["split"]:
                check(close(a["split"][k], b["split"][k], tol), f"{row} split {k} {b['split'][k]} != CTF's {a['split'][k]}")
    threads = {t["tid"]: t for t in other["threads"]}

    def only_an_unpaired_switch(t):
        """A thread with nothing but one switch (a sanitizer's, say, woken once): JSON has no
        slice of it, so no thread; its one fewer switch is the one allowed below."""
        return via_json and t["events"] == 0 and t["lost"] == 0 and t["switches"] == 1 and \
            t["tid"] not in threads
    ctf_threads = [t for t in ctf["threads"] if not (ctf["sched"] and only_an_unpaired_switch(t))]
    check(sorted(threads) == sorted(t["tid"] for t in ctf_threads), "not the same threads")
    for a in ctf_threads:
        b = threads.get(a["tid"], {})
        for k in ("name", "events", "lost"):
            check(a[k] == b.get(k), f"thread {a['tid']} {k} {b.get(k)!r} != CTF's {a[k]!r}")
        if ctf["sched"]:
            fewer = a["switches"] - b.get("switches", -1)
            check(fewer == 0 or (via_json and fewer == 1),
                  f"thread {a['tid']} switches {b.get('switches')} != CTF's {a['switches']}")
    if ctf["sched"] and name != "ctf":
        check(other["switches_lost"] is None, "switches_lost is not null")
    return bad


def compare_runs(ctf, other, name):
    """Another run of the same program, recorded in another format: what the program did alike."""
    def rows(r):
        return [(c["provider"], c["event"], c["kind"], c["count"], c.get("spans")) for c in r["classes"]]

    def threads(r):
        return sorted((t["name"], t["events"]) for t in r["threads"])

    bad = []
    if other["format"] != name:
        bad.append(f"{name}: format {other['format']}")
    if rows(ctf) != rows(other):
        bad.append(f"{name}: rows {rows(other)} != CTF's {rows(ctf)}")
    if threads(ctf) != threads(other):
        bad.append(f"{name}: threads {threads(other)} != CTF's {threads(ctf)}")
    if other["cputime"] != ctf["cputime"]:
        bad.append(f"{name}: cputime {other['cputime']}")
    return bad


def main():
    if sys.argv[1] == "--converted-list":
        ctf = json.load(open(sys.argv[2]))
        bad, n = [], 0
        for line in open(sys.argv[3]):
            args = line.split()
            if not args:
                continue
            other = json.load(open(args[0]))
            bad += [f"{args[0]}: {b}" for b in compare(ctf, other, args[1],
                                                        len(args) > 2 and args[2] == "json")]
            n += 1
        if bad:
            print("\n".join(bad))
            sys.exit(1)
        print(f"converted: {n}")
        return
    if sys.argv[1] == "--converted":
        ctf, other = (json.load(open(p)) for p in sys.argv[2:4])
        bad = compare(ctf, other, sys.argv[4], len(sys.argv) > 5 and sys.argv[5] == "json")
        if bad:
            print("\n".join(bad))
            sys.exit(1)
        print(f"converted agrees: {len(other['classes'])} rows, {other['events']} events, "
              f"{len(other['threads'])} threads")
        return
    if sys.argv[1] == "--runs":
        ctf, js, pf = (json.load(open(p)) for p in sys.argv[2:5])
        bad = compare_runs(ctf, js, "json") + compare_runs(ctf, pf, "perfetto")
        if bad:
            print("\n".join(bad))
            sys.exit(1)
        print(f"runs agree: {len(ctf['classes'])} rows, {ctf['events']} events")
        return
    ctf, js, pf = (json.load(open(p)) for p in sys.argv[1:4])
    bad = compare(ctf, js, "json") + compare(ctf, pf, "perfetto")
    if ctf["events"] == 0:
        bad.append("the CTF trace has no events")
    if bad:
        print("\n".join(bad))
        sys.exit(1)
    print(f"agree: {len(ctf['classes'])} rows, {ctf['events']} events, {len(ctf['threads'])} threads, "
          f"{ctf['lost']} lost" + (f", {ctf['switches']} switches" if ctf["sched"] else ""))


main()
