"""Imports every Python library the toolbox promises, and renders a plot."""
import importlib
import sys

modules = ["numpy", "pandas", "matplotlib", "seaborn", "scipy", "sklearn", "PIL", "openpyxl",
           "fastapi", "flask", "uvicorn", "requests", "httpx"]
failed = []
for name in modules:
    try:
        importlib.import_module(name)
    except Exception as e:  # report every missing module, not the first
        failed.append(f"{name}: {e}")
if failed:
    sys.exit("missing: " + "; ".join(failed))

import matplotlib.pyplot as plt  # noqa: E402

plt.plot([1, 2, 3], [1, 4, 9])
plt.savefig("/tmp/check.png")
print("python toolbox ok:", ", ".join(modules))
