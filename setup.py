"""Maps the ``dashraker`` subpackages onto the top-level folders (SPEC section 1)."""

from setuptools import find_packages, setup

FOLDERS = {
    "dashraker": "dashraker",
    "dashraker.hw": "hw",
    "dashraker.sim": "sim",
    "dashraker.models": "models",
    "dashraker.mapping": "mapping",
    "dashraker.asic": "asic",
    "dashraker.fpga": "fpga",
    "dashraker.trace": "trace",
}

setup(
    package_dir=FOLDERS,
    package_data={"dashraker.hw": ["*.vlt"], "dashraker.mapping": ["configs/*.yaml", "energy/*.yaml", "suites/*.yaml"]},
    packages=[
        name
        for package, folder in FOLDERS.items()
        for name in [package, *(f"{package}.{sub}" for sub in find_packages(folder))]
    ],
)
