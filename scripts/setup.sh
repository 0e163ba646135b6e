#!/usr/bin/env bash
# Installs the Debian 12 packages coord needs to build, run and test (skips apt when all are present).
# iproute2, iptables, iputils-ping and libnetfilter-queue-dev (+ a C compiler and Python headers to build the
# NetfilterQueue wheel) are for scripts/netlab.py, the network-namespace lab the netlab tests use.
set -euo pipefail
packages=(pkg-config libzmq3-dev libprotobuf-c-dev protobuf-c-compiler libv4l-dev libavformat-dev libavcodec-dev libavutil-dev libxxhash-dev protobuf-compiler ffmpeg python3 python3-venv
          iproute2 iptables iputils-ping libnetfilter-queue-dev build-essential python3-dev
          # GenICam cameras through Aravis (aravis-0.8.pc also needs libusb and zlib); aravis-tools' fake GigE Vision
          # camera is what Tests/python/test_genicam.py records from
          libaravis-dev libusb-1.0-0-dev zlib1g-dev aravis-tools
          # arv-tool reads a camera's features back (test_genicam: the trigger features a take sets and puts back)
          aravis-tools-cli
          # libcamera cameras (Raspberry Pi sensors; Sources/CLibcamera): Debian 12's libcamera 0.0.3 headers and libraries
          libcamera-dev
          # headless chromium renders sync-report.html for Tests/python/test_report_page.py's screenshot checks,
          # and chromium-driver lets Selenium drive the live console's page (test_console_page.py)
          chromium chromium-driver
          # a real Prometheus scrapes two nodes in Tests/python/test_metrics.py (promtool lints the exposition)
          prometheus
          # Tests/python/test_packages.py: a clean Debian 12 root (debootstrap), lintian, systemd-analyze verify and systemd-sysusers
          debootstrap lintian systemd
          # bench/collect.py compares coord collect with rsync
          rsync
          # ALSA capture for the node's microphones (libasound2-dev); Tests/python/test_alsa.py records a click train
          # played into a PulseAudio null sink through ALSA's pulse plugin
          libasound2-dev pulseaudio pulseaudio-utils libasound2-plugins alsa-utils
          # scripts/vmlab (Tests/python/test_vmlab.py, bench/vmlab.py): TCG virtual machines, their qcow2 overlays,
          # the ext4 root image (mkfs.ext4 -d), the initramfs (cpio) and the kernel's modules.dep (depmod)
          qemu-system-x86 qemu-utils e2fsprogs cpio kmod
          # coord deliver --to multiview: libavfilter's graph (scale, xstack, overlay, drawtext) and the labels' font
          libavfilter-dev libswscale-dev fonts-dejavu-core)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    sudo=""
    [[ $(id -u) -eq 0 ]] || sudo="sudo"
    echo "setup: installing ${missing[*]}" >&2
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
command -v swift >/dev/null || { echo "setup: Swift 6.3 is not on PATH (https://swift.org/install)." >&2; exit 1; }
