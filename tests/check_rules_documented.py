#!/usr/bin/env python3
"""Every rule defined in src/checks/rules.def (with the portability rules of the profiles' PORTABILITY
statements) has a section in docs/rules.md, and vice versa."""
import os
import re
import sys

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
defined = re.findall(r'^RULE\(\w+,\s*"([^"]+)"', open(os.path.join(root, "src/checks/rules.def")).read(), re.M)
# ... and the portability rules, one per PORTABILITY statement of the library profiles.
defined += ["portability." + q for q in re.findall(r'^PORTABILITY\(\w+,\s*"([^"]+)"',
                                                   open(os.path.join(root, "src/runtime/profile/mpi_profile.def")).read(), re.M)]
documented = re.findall(r"^## (\S+)\s*$", open(os.path.join(root, "docs/rules.md")).read(), re.M)
missing = sorted(set(defined) - set(documented))
extra = sorted(set(documented) - set(defined))
for r in missing:
    print(f"rule {r} is defined in rules.def but has no section in docs/rules.md")
for r in extra:
    print(f"docs/rules.md documents {r}, which rules.def does not define")
if len(defined) != len(set(defined)):
    print("a rule id is defined twice in rules.def")
    sys.exit(1)
print(f"{len(defined)} rules, all documented" if not missing and not extra else "")
sys.exit(1 if missing or extra else 0)
