"""``python -m harness.providers --port N --record FILE [--nested-marks limit|breakpoint|ignore]``"""
from harness.providers.server import main

main()
