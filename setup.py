"""Package layout: the library ``gymflow/`` and the app folders installed under its namespace.

The top-level folders ``cli/``, ``flows/``, ``tasks/``, ``deployments/`` and ``environments/``
are installed as ``gymflow.cli``, ``gymflow.flows`` … so the install adds one top-level name,
``gymflow``, and never shadows (or is shadowed by) a user's own ``tasks`` or ``flows`` package.
pyproject.toml holds everything else; setuptools reads this file only for the mapping, which
its declarative config cannot express for nested folders.
"""

from setuptools import find_packages, setup

APP_FOLDERS = ("cli", "flows", "tasks", "deployments", "environments")

packages = find_packages(include=["gymflow", "gymflow.*"])
package_dir = {"gymflow": "gymflow"}
for folder in APP_FOLDERS:
    packages.append(f"gymflow.{folder}")
    packages += [f"gymflow.{folder}.{sub}" for sub in find_packages(where=folder)]
    package_dir[f"gymflow.{folder}"] = folder

setup(packages=packages, package_dir=package_dir)
