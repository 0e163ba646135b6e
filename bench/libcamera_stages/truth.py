# truth.py TAKE_DIR...: each camera's new frames (distinct stripes) and centre − true centre, by vmlab_lib.truth.
import json, sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from vmlab_lib import truth
for d in sys.argv[1:]:
    d = Path(d); m = json.loads((d / "manifest.json").read_text())
    for cam in m["cameras"]:
        errors, found = truth.centre_errors(m, d, cam["node"], cam["camera"])
        counters = [s[0] for s in found if s is not None]
        new = len(errors); errors.sort()
        dev = cam["device"]
        print(d.name[-6:], dev.get("driver"), "groups", m["groups"], "new", new, f"({new / m['groups']:.0%})",
              "gadget frames spanned", counters[-1] - counters[0] + 1 if counters else None,
              "centre-true ms p50 %.1f min %.1f max %.1f" % (errors[new // 2] / 1e3, errors[0] / 1e3, errors[-1] / 1e3),
              "stamp", dev.get("timestamp"))
