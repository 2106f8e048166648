#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""
lowkey's Perfetto output, decoded with the Perfetto project's own protos, checked for structure.

Usage: check_pftrace.py FIXTURE LOWKEY CACHE_DIR [PLUGIN]

FIXTURE (tests/probe/formats_fixture.c) records a trace whose every event is known; LOWKEY
converts it (`lowkey convert`) to .pftrace and .json; the fixture also writes a .pftrace itself
(LK_TRACE_PERFETTO at lk_trace_stop), is traced by `lowkey trace --format perfetto -- FIXTURE`, and
serves while `lowkey trace --pid --format perfetto` attaches to it, and records Perfetto while it
loads PLUGIN (tests/probe/plugin.c), whose site registers during the trace. Both .pftrace files are decoded as perfetto.protos.Trace and
checked: sequences and their flags, interning (each string once per sequence, events by iid),
process, thread and counter tracks, slices per thread with their names, nesting and begin/end
pairing, arguments and counter values, the CPU-time extra counter, the clock snapshot, and that
the JSON of the same trace is on the same clock and three times the size or more.

The protos: perfetto_trace_pb2.py of PyPI's `perfetto` package. It is not imported (its
generated code insists on a newer protobuf runtime than Debian's python3-protobuf): the file
descriptor it holds is read out of its source and loaded into whatever protobuf runtime this
Python has. The package comes from an installed `perfetto`, else from CACHE_DIR, else is fetched
there with `pip download` (a 360 KB wheel, no dependencies). Exit status 77 (skipped, with the
reason) when the protobuf runtime or the package cannot be had, as on a machine offline.
"""
import ast
import glob
import importlib.util
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile

SKIP = 77
PERFETTO = "perfetto==0.59.1"
PB2 = "perfetto/protos/perfetto/trace/perfetto_trace_pb2.py"
ROUNDS = 50


def skip(why):
    print("SKIPPED: " + why)
    sys.exit(SKIP)


def protobuf_runtime():
    try:
        import google.protobuf  # noqa: F401
        return
    except ImportError:
        pass
    # Debian's python3-protobuf is for Debian's python3, which may not be first in PATH.
    debian = "/usr/bin/python3"
    if os.path.exists(debian) and os.path.realpath(sys.executable) != os.path.realpath(debian) \
            and not os.environ.get("LKT_PFTRACE_REEXEC"):
        os.environ["LKT_PFTRACE_REEXEC"] = "1"
        os.execv(debian, [debian] + sys.argv)
    skip("no protobuf runtime for Python: install python3-protobuf (deps/probe.deps)")


def pb2_source(cache):
    spec = importlib.util.find_spec("perfetto")
    if spec and spec.submodule_search_locations:
        for root in spec.submodule_search_locations:
            path = os.path.join(os.path.dirname(root), PB2)
            if os.path.exists(path):
                return open(path, encoding="utf-8").read()
    os.makedirs(cache, exist_ok=True)
    wheels = glob.glob(os.path.join(cache, "perfetto-*.whl"))
    if not wheels:
        pips = [[sys.executable, "-m", "pip"]] + [[p] for p in ("pip3", "pip") if shutil.which(p)]
        errors = []
        for pip in pips:
            try:
                r = subprocess.run(pip + ["download", "--no-deps", "--only-binary=:all:", "--dest", cache,
                                          "--disable-pip-version-check", "-q", PERFETTO],
                                   capture_output=True, text=True, timeout=180)
            except (OSError, subprocess.TimeoutExpired) as e:
                errors.append(str(e))
                continue
            if r.returncode == 0:
                break
            errors.append((r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1])
        wheels = glob.glob(os.path.join(cache, "perfetto-*.whl"))
        if not wheels:
            skip("PyPI's %s (Perfetto's protos) could not be fetched: %s" % (PERFETTO, "; ".join(errors)))
    return zipfile.ZipFile(sorted(wheels)[-1]).read(PB2).decode("utf-8")


def trace_class(source):
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    blob = None
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "AddSerializedFile":
            blob = ast.literal_eval(node.args[0])
    assert blob, "no file descriptor in perfetto_trace_pb2.py"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(descriptor_pb2.FileDescriptorProto.FromString(blob))
    desc = pool.FindMessageTypeByName("perfetto.protos.Trace")
    if hasattr(message_factory, "GetMessageClass"):
        return message_factory.GetMessageClass(desc)
    return message_factory.MessageFactory(pool).GetPrototype(desc)


# ---- the trace, as Perfetto's trace processor would read it ----

SLICE_BEGIN, SLICE_END, INSTANT, COUNTER = 1, 2, 3, 4
SEQ_CLEARED = 1
LK_CLOCK, REALTIME, MONOTONIC, BOOTTIME = 64, 1, 3, 6
THREAD_TIME_NS = 1


class Decoded:
    def __init__(self, trace):
        self.tracks = {}          # uuid -> TrackDescriptor (the last one)
        self.events = []          # dicts, in file order
        self.snapshots = []
        self.sequences = set()
        self.batches = {}         # sequence -> times its incremental state was cleared
        seq_state = {}
        for p in trace.packet:
            assert p.HasField("trusted_packet_sequence_id"), "a packet without a sequence"
            seq = p.trusted_packet_sequence_id
            self.sequences.add(seq)
            if p.sequence_flags & SEQ_CLEARED:
                self.batches[seq] = self.batches.get(seq, 0) + 1
                seq_state[seq] = {"names": {}, "categories": {}, "args": {}, "clock": None,
                                  "defaults": None, "first": True}
            st = seq_state.get(seq)
            assert st is not None, "sequence %d used before its state was cleared" % seq
            if p.HasField("trace_packet_defaults"):
                st["defaults"] = p.trace_packet_defaults
            if p.HasField("clock_snapshot"):
                self.snapshots.append(p.clock_snapshot)
                for c in p.clock_snapshot.clocks:
                    if c.clock_id == LK_CLOCK:
                        assert c.is_incremental, "lowkey's clock is an incremental one"
                        st["clock"] = c.timestamp
            self.intern(st, p)
            ts = self.timestamp(st, p)
            if p.HasField("track_descriptor"):
                self.tracks[p.track_descriptor.uuid] = p.track_descriptor
            if p.HasField("track_event"):
                # Its sequence's state was cleared before (above). SEQ_NEEDS_INCREMENTAL_STATE is
                # not needed: trace_processor reads it only to skip packets after a loss.
                self.events.append(self.event(st, seq, ts, p.track_event))

    @staticmethod
    def intern(st, p):
        if not p.HasField("interned_data"):
            return
        d = p.interned_data
        for kind, entries in (("names", d.event_names), ("categories", d.event_categories),
                              ("args", d.debug_annotation_names)):
            for e in entries:
                assert e.iid not in st[kind], "iid %d of %s interned twice" % (e.iid, kind)
                assert e.name not in st[kind].values(), "%r interned twice in one sequence" % e.name
                st[kind][e.iid] = e.name

    @staticmethod
    def timestamp(st, p):
        if not p.HasField("timestamp"):
            return None
        clock = p.timestamp_clock_id if p.HasField("timestamp_clock_id") else \
            st["defaults"].timestamp_clock_id if st["defaults"] else BOOTTIME
        if clock != LK_CLOCK:
            assert clock == MONOTONIC, "unexpected clock %d" % clock
            return p.timestamp
        st["clock"] += p.timestamp
        return st["clock"]

    def event(self, st, seq, ts, te):
        defaults = st["defaults"].track_event_defaults if st["defaults"] else None
        assert not te.HasField("name"), "an event name not interned: %r" % te.name
        track = te.track_uuid if te.HasField("track_uuid") else defaults.track_uuid
        args = {}
        for a in te.debug_annotations:
            assert a.HasField("name_iid"), "an argument name not interned"
            value = a.WhichOneof("value")
            args[st["args"][a.name_iid]] = (value, getattr(a, value))
        counter = None
        if te.HasField("counter_value"):
            counter = te.counter_value
        elif te.HasField("double_counter_value"):
            counter = te.double_counter_value
        extra = list(zip(te.extra_counter_track_uuids or (defaults.extra_counter_track_uuids if defaults else []),
                         te.extra_counter_values))
        return {"seq": seq, "ts": ts, "type": te.type, "track": track, "args": args, "counter": counter,
                "name": st["names"].get(te.name_iid) if te.HasField("name_iid") else None,
                "categories": [st["categories"][i] for i in te.category_iids], "extra": extra}


def check_trace(path, pid, procname):
    with open(path, "rb") as f:
        trace = TRACE.FromString(f.read())
    d = Decoded(trace)

    # clocks: lowkey's incremental clock tied to MONOTONIC, BOOTTIME and REALTIME as they are here
    assert d.snapshots, "no clock snapshot"
    for snap in d.snapshots:
        clocks = {c.clock_id: c.timestamp for c in snap.clocks}
        assert set(clocks) == {LK_CLOCK, MONOTONIC, BOOTTIME, REALTIME}, clocks
        assert clocks[LK_CLOCK] == clocks[MONOTONIC] and clocks[BOOTTIME] >= clocks[MONOTONIC]
        here = time.time_ns() - time.monotonic_ns()
        assert abs(clocks[REALTIME] - clocks[MONOTONIC] - here) < 2e9, "REALTIME - MONOTONIC is not this machine's"

    # tracks: the process, its threads by name, the counters
    processes = [t for t in d.tracks.values() if t.HasField("process")]
    assert len(processes) == 1 and processes[0].process.pid == (pid or processes[0].process.pid), processes
    pid = processes[0].process.pid
    assert processes[0].process.process_name == procname, processes[0].process.process_name
    threads = {t.uuid: t.thread.thread_name for t in d.tracks.values() if t.HasField("thread")}
    assert sorted(threads.values()) == ["fx-main", "worker-1", "worker-2"], threads
    for t in d.tracks.values():
        if t.HasField("thread"):
            assert t.thread.pid == pid and t.parent_uuid == processes[0].uuid
    counters = {t.name: t.uuid for t in d.tracks.values() if t.HasField("counter") and t.name.startswith("fx:")}
    assert sorted(counters) == ["fx:depth", "fx:ratio"], counters

    # a track's events in order on each sequence (several threads' sequences may share a counter
    # track, their packets interleaved in the file: trace_processor sorts them by time)
    by_track, by_sequence = {}, {}
    for e in d.events:
        by_track.setdefault(e["track"], []).append(e)
        by_sequence.setdefault((e["track"], e["seq"]), []).append(e["ts"])
    for (track, seq), stamps in by_sequence.items():
        assert stamps == sorted(stamps), "track %x: events out of order on sequence %d" % (track, seq)
    for events in by_track.values():
        events.sort(key=lambda e: e["ts"])

    # counters: depth 0..ROUNDS-1 from each worker; ratio NaN, then 1.5
    depth = [e["counter"] for e in by_track[counters["fx:depth"]]]
    assert all(e["type"] == COUNTER for e in by_track[counters["fx:depth"]])
    assert sorted(depth) == sorted(list(range(ROUNDS)) * 2), depth
    ratio = [e["counter"] for e in by_track[counters["fx:ratio"]]]
    assert len(ratio) == 2 and math.isnan(ratio[0]) and ratio[1] == 1.5, ratio

    for uuid, name in threads.items():
        events = by_track.get(uuid, [])
        assert all(e["categories"] == ["fx"] for e in events if e["type"] != SLICE_END)
        if name == "fx-main":
            assert [(e["type"], e["name"], e["args"]) for e in events] == \
                [(INSTANT, "bad_utf8", {"bad": ("string_value", "\ufffd\ufffd ok")})], events
            continue
        check_worker(d, name, events)
    return d


def check_worker(d, name, events):
    begins = [e["name"] for e in events if e["type"] == SLICE_BEGIN]
    assert begins == ["request", "query"] * ROUNDS, (name, begins)
    assert sum(e["type"] == SLICE_END for e in events) == 2 * ROUNDS
    stack, rows, cputime = [], [], []
    for e in events:
        if e["type"] == SLICE_BEGIN:
            stack.append((e["name"], e["ts"]))
        elif e["type"] == SLICE_END:
            assert stack, "%s: an end without its begin" % name
            assert stack.pop()[1] <= e["ts"]
        else:
            assert e["type"] == INSTANT and e["name"] == "row", e
            assert [s[0] for s in stack] == ["request", "query"], (name, stack)
            rows.append(e["args"])
        if e["type"] in (SLICE_BEGIN, SLICE_END):
            assert len(e["extra"]) == 1, "%s: a slice without its CPU time" % name
            track, value = e["extra"][0]
            t = d.tracks[track]
            assert t.counter.type == THREAD_TIME_NS and d.tracks[t.parent_uuid].thread.thread_name == name
            cputime.append(value)
        else:
            assert not e["extra"]
    assert not stack, "%s: spans left open" % name
    assert cputime == sorted(cputime) and cputime[-1] > 0, "%s: thread CPU time not monotonic" % name
    want = [{"i": ("int_value", k), "twice": ("uint_value", 2 * k), "half": ("double_value", k / 2.0),
             "label": ("string_value", "row")} for k in range(ROUNDS)]
    assert rows == want, (name, rows[:3])


def check_serve(path, pid):
    """A trace of `lkt_formats_fixture - serve` taken with lowkey trace --pid, without CPU time."""
    with open(path, "rb") as f:
        d = Decoded(TRACE.FromString(f.read()))
    processes = [t for t in d.tracks.values() if t.HasField("process")]
    assert len(processes) == 1 and processes[0].process.pid == pid, processes
    threads = {t.uuid: t.thread.thread_name for t in d.tracks.values() if t.HasField("thread")}
    assert list(threads.values()) == ["fx-serve"], threads
    events = [e for e in d.events if e["track"] in threads]
    rounds = [e["args"]["i"][1] for e in events if e["type"] == INSTANT]
    assert len(rounds) >= 10, "fewer than 10 rounds in a second"
    # written while it recorded: the thread's sequence in several batches, each clearing its state
    assert max(d.batches.values()) > 1, "the trace was not written while it recorded: %s" % d.batches
    assert rounds == list(range(rounds[0], rounds[0] + len(rounds))), rounds
    stack = []
    for e in events:
        assert not e["extra"], "CPU time where none was recorded"
        if e["type"] == SLICE_BEGIN:
            stack.append(e["name"])
        elif e["type"] == SLICE_END:
            assert stack, "an end without its begin"
            stack.pop()
        else:
            assert stack[-2:] == ["request", "query"], stack
    return len(events)


def check_json_agrees(json_path, d):
    """Same trace as JSON: the same events on the same clock (real time), and 3 times the size or more."""
    def no_constants(x):
        raise ValueError("a bare %s in the JSON" % x)
    with open(json_path, encoding="utf-8", errors="strict") as f:
        j = json.load(f, parse_constant=no_constants)
    snap = {c.clock_id: c.timestamp for c in d.snapshots[0].clocks}
    offset = snap[REALTIME] - snap[MONOTONIC]
    threads = {t.uuid: t.thread.thread_name for t in d.tracks.values() if t.HasField("thread")}
    names = {e["tid"]: e["args"]["name"] for e in j["traceEvents"] if e["name"] == "thread_name"}
    for uuid, name in threads.items():
        ours = [e["ts"] + offset for e in d.events if e["track"] == uuid]
        theirs = [e["ts"] * 1000 for e in j["traceEvents"]
                  if e["ph"] != "M" and names.get(e.get("tid")) == name and e["ph"] != "C"]
        assert len(ours) == len(theirs), (name, len(ours), len(theirs))
        worst = max(abs(a - b) for a, b in zip(ours, theirs))
        assert worst < 1000, "%s: JSON and Perfetto disagree by %d ns" % (name, worst)


def check_off_cpu(fixture, lowkey, work):
    """Context switches as off-CPU slices on a child track of each thread (docs/trace.md)."""
    ctf, pft, js, live = (os.path.join(work, n) for n in ("s.ctf", "s.pftrace", "s.json", "live.pftrace"))
    r = subprocess.run([fixture, ctf, "sched"], capture_output=True, text=True)
    if r.returncode == SKIP:
        print("off-CPU slices not checked: " + r.stderr.strip())
        return
    assert r.returncode == 0, r.stderr
    sleeper = int(r.stdout.split()[1])
    subprocess.run([lowkey, "convert", ctf, "-o", pft], check=True)
    subprocess.run([lowkey, "convert", ctf, "-o", js, "--format", "json"], check=True)
    rep = json.loads(subprocess.run([lowkey, "report", "--json", ctf], check=True, capture_output=True,
                                    text=True).stdout)
    slices = check_off_cpu_slices(pft, sleeper)
    check_off_cpu_agrees(slices, js, rep, pft)
    # the same written while recording (LK_TRACE_PERFETTO)
    r = subprocess.run([fixture, live, "sched-perfetto"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    check_off_cpu_slices(live, int(r.stdout.split()[1]))
    print("off-CPU: %d slices on %d threads' off-CPU tracks, %d left open; written while recording too"
          % (sum(len(r) for r in slices.values()), len(slices),
             sum(r[2] is None for rows in slices.values() for r in rows)))


def check_off_cpu_slices(path, sleeper):
    """The off-CPU tracks' structure, and fx-sleeper's slices; {tid: [(name, begin, end, args)]}."""
    with open(path, "rb") as f:
        d = Decoded(TRACE.FromString(f.read()))
    threads = {t.uuid: t.thread.tid for t in d.tracks.values() if t.HasField("thread")}
    off_tracks = {t.uuid: threads[t.parent_uuid] for t in d.tracks.values()
                  if t.name == "off-CPU" and t.parent_uuid in threads}
    assert sleeper in off_tracks.values(), ("no off-CPU track for fx-sleeper", off_tracks)
    for t in d.tracks.values():
        if t.name == "off-CPU":
            assert not t.HasField("thread") and not t.HasField("counter"), t

    slices = {}           # tid -> [(name, begin, end or None, args)]
    for uuid, tid in off_tracks.items():
        events = [e for e in d.events if e["track"] == uuid]
        rows, open_ = [], None
        for e in events:
            if e["type"] == SLICE_BEGIN:
                assert open_ is None, "tid %d: off-CPU slices nested" % tid
                assert e["name"] in ("preempted", "blocked") and e["categories"] == ["off-cpu"], e
                assert e["args"]["cpu"][0] == "uint_value" and not e["extra"], e
                open_ = e
            else:
                assert e["type"] == SLICE_END and open_ is not None, ("tid %d: not a slice's end" % tid, e)
                assert set(open_["args"]) == {"cpu", "next_cpu"} and open_["ts"] <= e["ts"], (open_, e)
                rows.append((open_["name"], open_["ts"], e["ts"], open_["args"]))
                open_ = None
        if open_ is not None:    # switched out, never back in before the trace ended: left open
            assert set(open_["args"]) == {"cpu"}, open_
            rows.append((open_["name"], open_["ts"], None, open_["args"]))
        slices[tid] = rows

    # fx-sleeper: its first switch was a switch in (no slice for it), a blocked slice inside each
    # fx:nap span, and its last switch out left open, after its last span
    thread_track = [u for u, tid in threads.items() if tid == sleeper][0]
    naps, stack = [], []
    for e in d.events:
        if e["track"] == thread_track and e["type"] == SLICE_BEGIN:
            stack.append(e["ts"])
        elif e["track"] == thread_track and e["type"] == SLICE_END:
            naps.append((stack.pop(), e["ts"]))
    assert len(naps) == ROUNDS, naps
    rows = slices[sleeper]
    start = {c.clock_id: c.timestamp for c in d.snapshots[0].clocks}[LK_CLOCK]
    assert rows[0][1] > start, ("a slice for the time before fx-sleeper's first switch in", rows[0], start)
    last = rows[-1]
    assert last[0] == "blocked" and last[2] is None and last[1] >= naps[-1][1], last
    assert all(end is not None for _, _, end, _ in rows[:-1])
    for begin, end in naps:
        inside = [row for row in rows if row[0] == "blocked" and begin <= row[1] and row[2] and row[2] <= end]
        assert inside, "no blocked slice inside the fx:nap span %d-%d" % (begin, end)
    return slices


def check_off_cpu_agrees(slices, js, rep, path):
    """The same slices as the JSON's (which leaves out those that did not end), at the same times."""
    with open(path, "rb") as f:
        d = Decoded(TRACE.FromString(f.read()))
    with open(js, encoding="utf-8") as f:
        j = json.load(f)["traceEvents"]
    snap = {c.clock_id: c.timestamp for c in d.snapshots[0].clocks}
    offset = snap[REALTIME] - snap[MONOTONIC]
    for tid, rows in slices.items():
        theirs = [e for e in j if e.get("cat") == "off-cpu" and e["tid"] == tid]
        ours = [row for row in rows if row[2] is not None]
        assert len(ours) == len(theirs), (tid, len(ours), len(theirs))
        for (name, begin, end, args), e in zip(ours, theirs):
            assert name == e["name"] and args["cpu"][1] == e["args"]["cpu"] and \
                args["next_cpu"][1] == e["args"]["next_cpu"], (name, args, e)
            assert abs(begin + offset - e["ts"] * 1000) < 1000 and abs(end - begin - e["dur"] * 1000) < 1000, (begin, end, e)

    # one slice per switch out that lowkey report counts (when the kernel lost none)
    if not rep.get("switches_lost"):
        assert sum(len(rows) for rows in slices.values()) == rep["switches"], (rep["switches"], slices)


def check_dlopen(fixture, work, plugin):
    """A site registered while the trace is written as it records: its events, written live."""
    out = os.path.join(work, "dlopen.pftrace")
    r = subprocess.run([fixture, out, "dlopen"], capture_output=True, text=True,
                       env=dict(os.environ, LKT_PLUGIN=plugin))
    assert r.returncode == 0, r.stderr
    with open(out, "rb") as f:
        d = Decoded(TRACE.FromString(f.read()))
    fired = [e["args"]["i"][1] for e in d.events if e["name"] == "fired" and e["categories"] == ["plug"]]
    assert fired == list(range(100)) * 10, fired[:5]
    ticks = [e for e in d.events if e["name"] == "tick"]
    assert len(ticks) == 200, len(ticks)
    # written in batches while it recorded, the plugin's events too (not converted whole at stop)
    assert max(d.batches.values()) > 1, d.batches
    return len(d.events)


def main():
    if len(sys.argv) not in (4, 5):
        print(__doc__)
        return 2
    fixture, lowkey, cache = sys.argv[1:4]
    protobuf_runtime()
    global TRACE
    TRACE = trace_class(pb2_source(cache))
    work = tempfile.mkdtemp(prefix="lowkey-pftrace-")
    try:
        ctf, pft, js, direct = (os.path.join(work, n) for n in ("t.ctf", "t.pftrace", "t.json", "direct.pftrace"))
        pid = int(subprocess.run([fixture, ctf, "ctf"], check=True, capture_output=True, text=True).stdout)
        subprocess.run([lowkey, "convert", ctf, "-o", pft], check=True)
        subprocess.run([lowkey, "convert", ctf, "-o", js, "--format", "json"], check=True)
        procname = os.path.basename(fixture)[:63]
        d = check_trace(pft, pid, procname)
        check_json_agrees(js, d)
        size_pft, size_json = os.path.getsize(pft), os.path.getsize(js)
        assert size_pft * 3 <= size_json, "Perfetto %d bytes, JSON %d: not a third" % (size_pft, size_json)
        print("converted: %d events, %d sequences; %d bytes against %d of JSON (%.2f)"
              % (len(d.events), len(d.sequences), size_pft, size_json, size_pft / size_json))
        # lowkey convert --format ctf: a copy that converts the same; its errors and usage
        copy, again = os.path.join(work, "copy.ctf"), os.path.join(work, "again.pftrace")
        subprocess.run([lowkey, "convert", ctf, "-o", copy, "--format", "ctf"], check=True)
        subprocess.run([lowkey, "convert", copy, "-o", again], check=True)
        check_trace(again, pid, procname)
        for args, status in (([], 2), ([ctf], 2), ([ctf, "-o", again, "--format", "xml"], 2),
                             ([os.path.join(work, "none.ctf"), "-o", again], 1),
                             ([ctf, "-o", copy, "--format", "ctf"], 1), ([ctf, "-o", work + "/", "--format", "json"], 1)):
            r = subprocess.run([lowkey, "convert"] + args, capture_output=True, text=True)
            assert r.returncode == status and r.stderr.startswith("lowkey convert:"), (args, r.returncode, r.stderr)

        pid = int(subprocess.run([fixture, direct, "perfetto"], check=True, capture_output=True, text=True).stdout)
        d = check_trace(direct, pid, procname)
        print("written at lk_trace_stop: %d events, %d sequences" % (len(d.events), len(d.sequences)))

        # lowkey trace --format perfetto -- CMD: the environment starts the trace
        run = os.path.join(work, "run.pftrace")
        r = subprocess.run([lowkey, "trace", "-e", "fx", "--format", "perfetto", "--cputime", "--json", "-o", run,
                            "--", fixture, "-", "none"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        summary = json.loads(r.stderr.strip().splitlines()[-1])
        assert summary["format"] == "perfetto" and summary["output"] == run, summary
        assert summary["bytes"] == os.path.getsize(run), summary
        d = check_trace(run, None, procname)
        print("lowkey trace --format perfetto: %d events" % len(d.events))

        # lowkey trace --pid --format perfetto: the process converts at the stop
        attached = os.path.join(work, "attached.pftrace")
        env = dict(os.environ, LOWKEY_CONTROL="1", XDG_RUNTIME_DIR="")
        server = subprocess.Popen([fixture, "-", "serve"], stdout=subprocess.PIPE, text=True, env=env)
        try:
            ready = server.stdout.readline().split()
            assert ready[:1] == ["ready"], ready
            r = subprocess.run([lowkey, "trace", "--pid", ready[1], "-e", "fx", "--format", "perfetto",
                                "--duration", "1", "-o", attached], capture_output=True, text=True, timeout=120)
            assert r.returncode == 0, r.stderr
        finally:
            server.terminate()
            server.wait(timeout=60)
        print("lowkey trace --pid --format perfetto: %d events" % check_serve(attached, int(ready[1])))

        check_off_cpu(fixture, lowkey, work)
        if len(sys.argv) == 5:
            print("a site registered while recording: %d events" % check_dlopen(fixture, work, sys.argv[4]))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
