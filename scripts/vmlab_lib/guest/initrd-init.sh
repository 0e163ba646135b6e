#!/bin/busybox sh
# vmlab's initramfs: load virtio-blk and ext4 (Debian builds them as modules), mount /dev/vda, hand over to systemd.
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
for m in $(cat /modules); do insmod "/lib/modules/$m" 2>/dev/null; done
i=0
while [ ! -b /dev/vda ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done
if ! mount -t ext4 -o rw,noatime /dev/vda /newroot; then
    echo "vmlab initramfs: cannot mount /dev/vda as ext4" > /dev/console
    exec sh
fi
umount /proc /sys
mount --move /dev /newroot/dev
exec switch_root /newroot /sbin/init
