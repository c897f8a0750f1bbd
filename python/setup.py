"""The wheel carries a native library: a binary distribution (files in platlib), tagged
py3-none-PLATFORM, where PLATFORM is $CGJIT_WHEEL_PLAT (scripts/wheel.sh sets it from the glibc
libcgjit.so needs; manylinux_2_28_x86_64 by default)."""
import os

from setuptools import setup
from setuptools.dist import Distribution

try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools before 70.1
    from wheel.bdist_wheel import bdist_wheel


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True


class PlatformWheel(bdist_wheel):
    def finalize_options(self):
        super().finalize_options()
        self.root_is_pure = False

    def get_tag(self):
        return "py3", "none", os.environ.get("CGJIT_WHEEL_PLAT", "manylinux_2_28_x86_64")


setup(distclass=BinaryDistribution, cmdclass={"bdist_wheel": PlatformWheel})
