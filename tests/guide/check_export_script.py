#!/usr/bin/env python3
"""The guide's plain-PyTorch script (scripts/export_attention_torch.py) runs and `attnscope report` reads its output:
exports 3 layers x 2 heads of a tiny random transformer, runs `attnscope report FILE --json OUT`, and checks exit 0,
"6 heads" in the printed header, and 6 heads in the JSON with the columns that need scores and values filled in.
Usage: check_export_script.py ATTNSCOPE SCRIPT WORK_DIR (run by the Python that has torch, /usr/bin/python3).
Exits 77 (skipped) when this Python cannot import torch and numpy."""
import json
import math
import os
import subprocess
import sys

SKIP = 77


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    attnscope, script, work = sys.argv[1:]
    try:
        import numpy  # noqa: F401
        import torch  # noqa: F401
    except ImportError as error:
        print("SKIPPED: %s has no torch/numpy (%s); the guide's script needs them" % (sys.executable, error))
        return SKIP
    os.makedirs(work, exist_ok=True)
    npz = os.path.join(work, "export.npz")
    report_json = os.path.join(work, "export_report.json")
    export = subprocess.run([sys.executable, script, "--out", npz, "--layers", "3", "--heads", "2", "--length", "40",
                             "--width", "32"], capture_output=True, text=True, timeout=300)
    print(export.stdout, export.stderr)
    if export.returncode != 0:
        print("FAIL: the export script exited %d" % export.returncode)
        return 1
    report = subprocess.run([attnscope, "report", npz, "--columns", "all", "--json", report_json],
                            capture_output=True, text=True, timeout=300)
    print(report.stdout, report.stderr)
    if report.returncode != 0:
        print("FAIL: attnscope report exited %d" % report.returncode)
        return 1
    if "6 heads" not in report.stdout:
        print("FAIL: the report does not say '6 heads'")
        return 1
    with open(report_json, encoding="utf-8") as file:
        heads = json.load(file)["heads"]
    if sorted((h["layer"], h["head"]) for h in heads) != [(l, h) for l in range(3) for h in range(2)]:
        print("FAIL: the JSON report does not hold layers 0-2 x heads 0-1")
        return 1
    for head in heads:  # the scores and values were read: the columns that need them have numbers
        for column in ("entropy", "max_scaled_logit", "gradient_sensitivity"):
            value = head.get(column)
            if not isinstance(value, (int, float)) or not math.isfinite(value):
                print("FAIL: layer %d head %d: %s = %r" % (head["layer"], head["head"], column, value))
                return 1
    print("OK: attnscope report read the script's output (6 heads)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
