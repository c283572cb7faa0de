"""Checks the invoices package against SPEC.md, feature by feature, and reports which features are broken."""
from decimal import Decimal as D

from invoices import add_tax, apply_discount, format_amount, line_total, parse_amount, split_evenly

# (feature of SPEC.md, function, arguments, the result the spec asks for, or ValueError when it must raise)
CASES = [
    ("1. parsing amounts", parse_amount, ("$1,204.50",), D("1204.50")),
    ("1. parsing amounts", parse_amount, (" 45.00 ",), D("45.00")),
    ("1. parsing amounts", parse_amount, ("12,5",), ValueError),
    ("1. parsing amounts", parse_amount, ("",), ValueError),
    ("2. line totals", line_total, (3, D("19.99")), D("59.97")),
    ("2. line totals", line_total, (3, D("0.335")), D("1.01")),
    ("2. line totals", line_total, (0, D("19.99")), ValueError),
    ("3. discounts", apply_discount, (D("100.00"), 15), D("85.00")),
    ("3. discounts", apply_discount, (D("0.25"), 50), D("0.13")),
    ("3. discounts", apply_discount, (D("2.50"), 10), D("2.25")),
    ("3. discounts", apply_discount, (D("10.00"), 101), ValueError),
    ("4. tax", add_tax, (D("100.00"), D("0.2")), D("120.00")),
    ("4. tax", add_tax, (D("0.05"), D("0.1")), D("0.06")),
    ("5. splitting", split_evenly, (D("9.00"), 3), [D("3.00")] * 3),
    ("5. splitting", split_evenly, (D("10.00"), 3), [D("3.34"), D("3.33"), D("3.33")]),
    ("5. splitting", split_evenly, (D("0.05"), 2), [D("0.03"), D("0.02")]),
    ("6. formatting", format_amount, (D("-1234.5"),), "-1,234.50"),
    ("6. formatting", format_amount, (D("1000000"),), "1,000,000.00"),
]

features = {}
for feature, function, arguments, expected in CASES:
    failures = features.setdefault(feature, [])
    call = f"{function.__name__}({', '.join(map(repr, arguments))})"
    try:
        actual = function(*arguments)
    except Exception as error:
        if expected is not ValueError or not isinstance(error, ValueError):
            failures.append(f"{call} raised {type(error).__name__}: {error}")
        continue
    if expected is ValueError:
        failures.append(f"{call} returned {actual!r}, expected ValueError")
    elif actual != expected or str(actual) != str(expected):
        failures.append(f"{call} returned {actual!r}, expected {expected!r}")

for feature, failures in features.items():
    checks = sum(case[0] == feature for case in CASES)
    if failures:
        print(f"FAIL  {feature}: {len(failures)} of {checks} checks failed")
        for failure in failures:
            print(f"      {failure}")
    else:
        print(f"ok    {feature}: {checks} checks")
broken = [feature for feature, failures in features.items() if failures]
print(f"\n{len(broken)} of {len(features)} features broken: {', '.join(broken) or 'none'}")
