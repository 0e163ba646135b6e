#!/bin/bash
# stages.sh SECONDS: one take on a running lab (LAB: a `scripts/vmlab up LAB --vms 1 --camera libcamera` directory;
# TAKES: where the takes go) with each stage's count (issue 37): the gadget's frames queued and dropped, uvcvideo's
# own stream statistics (debugfs), the node's libcamera line (frames libcamera completed, frames the recorder took),
# and the file's new frames against the stripes (truth.py). A late arm under TCG is retried.
R="$(dirname "$0")/../../scripts/vmlab run ${LAB:-/tmp/d/lab} vm1 --"
g0=$($R 'cat /run/vmlab-uvc.json')
for i in 1 2 3 4; do
  out=$(${LAB:-/tmp/d/lab}/host/usr/bin/coord start-take --rig ${LAB:-/tmp/d/lab}/rig.yaml --seconds ${1:-6} --takes-dir ${TAKES:-/tmp/d/takes} 2>&1)
  echo "$out" | grep -q "did not answer arming" || break
  echo "retry $i"; sleep 5
done
echo "$out" | grep -E "dup:|coord:|warning|first USB" | cut -c1-300
g1=$($R 'cat /run/vmlab-uvc.json')
python3 -c "import json,sys; a,b=json.loads(sys.argv[1]),json.loads(sys.argv[2]); print('gadget queued', b['frames']-a['frames'], 'dropped', b['dropped']-a['dropped'])" "$g0" "$g1"
$R 'grep -E "frames|packets|invalid" /sys/kernel/debug/usb/uvcvideo/*/stats | tr "\n" " "; echo; journalctl -u coord-node -n 30 --no-pager | grep -E "libcamera camera .* stopped|load" | tail -3 | cut -c1-300'
T=$(ls -td ${TAKES:-/tmp/d/takes}/2026* | head -1); python3 $(dirname "$0")/truth.py $T
