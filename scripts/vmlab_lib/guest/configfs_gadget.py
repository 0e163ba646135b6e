"""The configfs plumbing both lab gadgets share (uvc_gadget.py, uac2_gadget.py; issue 36): a gadget directory with
its ids and strings, one configuration holding one function, bound to a UDC of the lab's dummy_hcd, and unbound.
Runs in the guest from the lab's 9p share, beside the gadget programs."""
import os
from pathlib import Path

ROOT = Path("/sys/kernel/config/usb_gadget")
VENDOR = "0x1d6b"  # Linux Foundation, as the kernel's own gadgets


def write(path: Path, value) -> None:
    path.write_text(f"{value}\n")


def link(link_path: Path, target: Path) -> None:
    if not link_path.is_symlink():
        link_path.symlink_to(target)


def load(module: str) -> None:
    """libcomposite and the function's module, and configfs mounted."""
    os.system(f"modprobe libcomposite && modprobe {module}")
    if not ROOT.exists():
        os.system("mount -t configfs none /sys/kernel/config")


def gadget(name: str, product_id: str, product: str, serial: str, configuration: str) -> Path:
    """The gadget directory (made once; its attributes are rewritten, which configfs allows while unbound)."""
    g = ROOT / name
    g.mkdir(exist_ok=True)
    write(g / "idVendor", VENDOR)
    write(g / "idProduct", product_id)
    write(g / "bcdUSB", "0x0200")
    s = g / "strings/0x409"
    s.mkdir(parents=True, exist_ok=True)
    write(s / "manufacturer", "coord vmlab")
    write(s / "product", product)
    write(s / "serialnumber", serial)
    c = g / "configs/c.1"
    (c / "strings/0x409").mkdir(parents=True, exist_ok=True)
    write(c / "strings/0x409/configuration", configuration)
    return g


def function(g: Path, name: str) -> Path:
    f = g / "functions" / name
    f.mkdir(exist_ok=True)
    return f


def configured(g: Path, name: str) -> bool:
    """Whether function `name` is already in the gadget's configuration (an earlier run made it)."""
    return (g / "configs/c.1" / name).is_symlink()


def bind(g: Path, udc: str, name: str) -> None:
    """Puts function `name` into the configuration (once) and binds the gadget to `udc` (rebinding if bound)."""
    link(g / "configs/c.1" / name, g / "functions" / name)
    if (g / "UDC").read_text().strip():
        write(g / "UDC", "")
    write(g / "UDC", udc)


def unbind(g: Path) -> None:
    """Unbinds the gadget from its UDC: to the host, the device is unplugged."""
    try:
        write(g / "UDC", "")
    except OSError:
        pass
