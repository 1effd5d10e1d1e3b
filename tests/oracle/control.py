#!/usr/bin/env python3
"""The judge's failing control: copies what oracle.primitives wrote (SOURCE), alters four results and
checks that judge.py reports exactly those four cases and exits 1. It judges the cases of the four
functions (sin, tanh, add, div: 22 cases, their edge, bf16 and integer variants among them), not all 223 again:
oracle.primitives has judged every unaltered one.

    control.py SOURCE WORK
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np

source, work = sys.argv[1], sys.argv[2]
shutil.rmtree(work, ignore_errors=True)
shutil.copytree(source, work)
FUNCTIONS = {"sin", "tanh", "add", "div"}
with open(os.path.join(work, "manifest.jsonl")) as m:
    entries = [line for line in m if line.strip() and json.loads(line)["fn"] in FUNCTIONS]
with open(os.path.join(work, "manifest.jsonl"), "w") as m:
    m.writelines(entries)


def alter(label, name, change):
    path = os.path.join(work, label, name)
    a = np.load(path)
    change(a.reshape(-1))
    np.save(path, a)


def ulps(a, n):
    bits = a.view(np.int32)
    bits[1] += n


alter("sin", "value.npy", lambda a: ulps(a, 3))                     # a value 3 ULP off (sin allows 2)
def scale_largest(a, factor):
    i = int(np.argmax(np.abs(a)))
    a[i] *= factor


alter("tanh", "vjp0.npy", lambda a: scale_largest(a, 1 + 1e-4))        # a gradient 1e-4 off (tanh allows 1e-5)
alter("add", "vmap0_out.npy", lambda a: a.__setitem__(2, a[2] + 1e-3))  # one vmapped element
alter("div@edge_s32", "value.npy", lambda a: a.__setitem__(5, a[5] + 1))  # one integer
r = subprocess.run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "judge.py"), "--dir", work],
                   capture_output=True, text=True)
reported = sorted({line.split()[1].rstrip(":") for line in r.stdout.splitlines() if line.startswith("DISAGREES")})
want = sorted(["sin", "tanh", "add", "div@edge_s32"])
print(r.stdout[-2000:])
if r.returncode != 1 or reported != want:
    print(f"control: the judge reported {reported} (exit {r.returncode}); it must report exactly {want} and exit 1")
    sys.exit(1)
print("control: the judge reported exactly the four altered cases")
