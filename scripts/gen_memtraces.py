#!/usr/bin/env python3
"""Writes the sample memory traces in traces/samples/ (DRAMsim3 format: '<hex address> READ|WRITE <cycle>').

    scripts/gen_memtraces.py [out_dir] [requests]

seq_read_64B.trace     sequential 64 B reads, all issued at cycle 0 (as fast as the memory accepts)
random_read_64B.trace  random 64 B-aligned reads over 1 GiB, all at cycle 0 (fixed seed)
mixed_rw_64B.trace     sequential reads with every fourth request a write, one request every 4 cycles
two_streams_64B.trace  two sequential 64 B read streams 1 MiB apart, interleaved, four pairs per cycle: with
                       hbm.row_hash=false they meet in every bank of 910b at rows 0 and 1, so each request finds the
                       other stream's row open (what FR-FCFS reorders, docs/memory.md)
"""
import os
import random
import sys

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "traces", "samples")
n = int(sys.argv[2]) if len(sys.argv) > 2 else 4096
os.makedirs(out, exist_ok=True)
rng = random.Random(1)
with open(os.path.join(out, "seq_read_64B.trace"), "w") as f:
    for i in range(n):
        f.write(f"0x{i * 64:x} READ 0\n")
with open(os.path.join(out, "random_read_64B.trace"), "w") as f:
    for _ in range(n):
        f.write(f"0x{rng.randrange(1 << 24) * 64:x} READ 0\n")
with open(os.path.join(out, "mixed_rw_64B.trace"), "w") as f:
    for i in range(n):
        op = "WRITE" if i % 4 == 3 else "READ"
        f.write(f"0x{(1 << 20) + i * 64:x} {op} {i * 4}\n")
with open(os.path.join(out, "two_streams_64B.trace"), "w") as f:
    for i in range(n // 2):
        f.write(f"0x{i * 64:x} READ {i // 4}\n")
        f.write(f"0x{(1 << 20) + i * 64:x} READ {i // 4}\n")
