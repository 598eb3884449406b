"""Maps the repository's top-level folders onto one import namespace, ``embody.*``.

The folders stay where users expect them (robots/, sims/, ...) while code always imports
``embody.robots``, ``embody.sims``, ... Works for regular and editable installs.

Each method under papers/ with a ``plugin.py`` is registered as an ``embody.plugins`` entry point,
exactly as a third-party plugin registers itself in its own pyproject.toml (embody/plugins.py). A tree
without papers/ installs the core alone. After adding a method folder, reinstall (scripts/setup.sh).
"""

from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).parent
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
    if not (HERE / folder).is_dir():  # a tree without papers/: the core alone
        continue
    package_dir[package] = folder
    packages.append(package)
    packages += [f"{package}.{sub}" for sub in find_packages(folder)]

# model files, motion clips and PDDL under assets/ live in plain folders, not packages
package_data = {
    "embody.assets": ["**/*.xml", "**/*.urdf", "**/*.yaml", "**/*.json", "**/*.pddl", "**/*.npz", "**/*.safetensors"],
    # hand-written spec files a method ships (backdoor triggers); its committed policies (ALMI's checkpoint)
    "embody.papers": ["*/specs/*.yaml", "*/policies/*/*.yaml", "*/policies/*/*.json", "*/policies/*/*/*"],
    "embody.benchmarks": ["peers/*.py"],  # peer scripts run in the peers' own environments
}

plugins = [
    f"{d.name} = embody.papers.{d.name}.plugin:register"
    for d in sorted((HERE / "papers").glob("*"))
    if (d / "plugin.py").is_file()
]

setup(
    packages=packages,
    package_dir=package_dir,
    package_data=package_data,
    entry_points={"console_scripts": ["embody = embody.cli:main"], "embody.plugins": plugins},
)
