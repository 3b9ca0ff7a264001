#!/usr/bin/env python3
"""What a runtime/trace says about the CommitLog's group commit.

Usage: go tool trace -d=parsed TRACE > trace.txt; tools/peers/flushtrace.py trace.txt
(TRACE from a server run with --pprof: curl -o TRACE 'ADMIN/debug/pprof/trace?seconds=1'.)

Prints, over the flushes in the trace: how long each fdatasync took, how many
sends blocked waiting for each flush (the records it carried, near enough), how
long into each fdatasync another goroutine first ran (the flusher's P handed
over), the flushes in order, and how much of the time P 0 sat idle.
"""
import bisect
import re
import sys

HDR = re.compile(r'^M=(-?\d+) P=(-?\d+) G=(-?\d+) (\w+) Time=(\d+)(.*)$')
GO = re.compile(r'GoID=(\d+) (\w+)->(\w+)')


def events(path):
    cur = None
    for line in open(path):
        if line.startswith('M='):
            m = HDR.match(line)
            cur = None
            if not m:
                continue
            g = GO.search(m.group(6))
            cur = {'t': int(m.group(5)), 'rest': m.group(6), 'go': int(g.group(1)) if g else None,
                   'fr': g.group(2) if g else None, 'to': g.group(3) if g else None, 'stk': [], 'sect': None}
            yield cur
        elif cur is not None:
            s = line.strip()
            if s in ('TransitionStack=', 'Stack='):
                cur['sect'] = s
            elif cur['sect'] == 'TransitionStack=' and ' @' in s:
                cur['stk'].append(s.split(' @')[0])


def q(x):
    x = sorted(x)
    n = len(x)
    if not n:
        return 'none'
    return 'n=%d mean=%.1f p10=%.1f p50=%.1f p90=%.1f max=%.1f' % (n, sum(x) / n, x[n // 10], x[n // 2], x[n * 9 // 10], x[-1])


def main(path):
    ev = sorted(events(path), key=lambda e: e['t'])
    has = lambda e, f: any(f in s for s in e['stk'])
    fl = next((e['go'] for e in ev if e['to'] == 'Syscall' and has(e, 'flushOnce')), None)
    if fl is None:
        sys.exit('no flush in the trace')
    syncs, waits, others, start = [], [], [], None
    idle, idle_from, t_first, t_last = 0, None, ev[0]['t'], ev[-1]['t']
    for e in ev:
        if e['go'] == fl and e['to'] == 'Syscall' and has(e, 'Fdatasync'):
            start = e['t']
        elif e['go'] == fl and e['fr'] == 'Syscall' and start is not None:
            syncs.append((start, e['t']))
            start = None
        elif e['go'] not in (None, fl) and e['fr'] == 'Running' and e['to'] == 'Waiting' and has(e, 'waitFlushed'):
            waits.append(e['t'])
        elif e['go'] not in (None, fl) and e['fr'] == 'Runnable' and e['to'] == 'Running':
            others.append(e['t'])
        if 'ProcID=0 ' in e['rest']:
            if 'Running->Idle' in e['rest']:
                idle_from = e['t']
            elif 'Idle->Running' in e['rest'] and idle_from is not None:
                idle += e['t'] - idle_from
                idle_from = None
    group = [bisect.bisect_left(waits, s) - bisect.bisect_left(waits, p) for (p, _), (s, _) in zip(syncs, syncs[1:])]
    handoff = []
    for s, t in syncs:
        i = bisect.bisect_left(others, s)
        if i < len(others) and others[i] < t:
            handoff.append((others[i] - s) / 1e3)
    print('flushes (fdatasyncs) in %.0f ms: %d' % ((t_last - t_first) / 1e6, len(syncs)))
    print('fdatasync µs:                      ', q([(t - s) / 1e3 for s, t in syncs]))
    print('sends waiting per flush:           ', q(group))
    print('µs into a fdatasync until another goroutine ran:', q(handoff),
          '(%d of %d fdatasyncs let none run)' % (len(syncs) - len(handoff), len(syncs)))
    print('P 0 idle: %.0f%% of the trace' % (100 * idle / (t_last - t_first)))
    print('the first 30 flushes, sends waiting for each:', group[:30])


if __name__ == '__main__':
    main(sys.argv[1])
