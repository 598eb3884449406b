"""Maps the repository's top-level folders onto one import namespace, ``embody.*``.

The folders stay where users expect them (robots/, sims/, ...) while code always imports
``embody.robots``, ``embody.sims``, ... Works for regular and editable installs.
"""

from setuptools import find_packages, setup

ROOTS = {
    "embody": "embody",
    "embody.robots": "robots",
    "embody.sims": "sims",
    "embody.policies": "policies",
    "embody.planners": "planners",
    "embody.hardware": "hardware",
    "embody.assets": "assets",
    "embody.benchmarks": "benchmarks",
    "embody.papers": "papers",
    "embody.datasets": "datasets",
}

packages, package_dir = [], {}
for package, folder in ROOTS.items():
    package_dir[package] = folder
    packages.append(package)
    packages += [f"{package}.{sub}" for sub in find_packages(folder)]

# model files, motion clips and PDDL under assets/ live in plain folders, not packages
package_data = {"embody.assets": ["**/*.xml", "**/*.urdf", "**/*.yaml", "**/*.json", "**/*.pddl", "**/*.npz"]}

setup(packages=packages, package_dir=package_dir, package_data=package_data)
