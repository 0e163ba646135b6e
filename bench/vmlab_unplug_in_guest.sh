#!/bin/sh
# Issue 36 item 4, the unplug through the real USB stack with the emulated network out of the way: run in a lab VM
# whose webcam is the gadget (`scripts/vmlab up RUN --camera uvc --mic uac2`), with RUN/share/rig-local.yaml a rig
# of that VM's own node at tcp://127.0.0.1:5710 (security cert /mnt/host/coordinator.key_secret, copied from
# RUN/keys):  scripts/vmlab run --timeout 400 RUN vm2 -- sh /mnt/host/vmlab_unplug_in_guest.sh
# Records 8 s with coord in the guest, unbinds the webcam gadget's UDC once coord reports 2 s recorded, and prints
# coord's summary, the manifest's status, groups and camera-ended sentence, the kernel's log and the gadget's report.
rm -rf /tmp/gt; mkdir -p /tmp/gt
(coord start-take --rig /mnt/host/rig-local.yaml --seconds 8 --takes-dir /tmp/gt > /tmp/ct.log 2>&1; echo "rc=$?" >> /tmp/ct.log) &
for i in $(seq 3000); do grep -q "recording [2-9]" /tmp/ct.log && break; grep -q "^rc=" /tmp/ct.log && break; sleep 0.05; done
echo "unbind at $(cut -d' ' -f1 /proc/uptime)"; echo > /sys/kernel/config/usb_gadget/vmlab_uvc/UDC; echo "unbound at $(cut -d' ' -f1 /proc/uptime)"
wait
grep -v "^recording" /tmp/ct.log | tail -25
python3 - <<'PY'
import glob, json
m = json.load(open(glob.glob("/tmp/gt/*/manifest.json")[0]))
print(m["status"], m["groups"], [(c["node"], c["frames"], c.get("device")) for c in m["cameras"]])
print([e["detail"] for e in m["events"] if e["kind"] == "camera-ended"])
PY
dmesg | tail -8; cat /run/vmlab-uvc.json
