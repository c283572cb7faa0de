"""Revenue of 2024 per region and month from the messy order export: query, clean, chart, summary."""
import io
from collections import defaultdict
from datetime import datetime

from tools import save_artifact
from tools.sales import query

result = query("SELECT * FROM orders ORDER BY id")
assert not result["truncated"], "more rows than one query returns: page with LIMIT/OFFSET"
rows = result["rows"]

DATE_FORMATS = ("%Y-%m-%d", "%d/%m/%Y", "%d %b %Y")  # web, store, phone


def parse_date(text):
    for date_format in DATE_FORMATS:
        try:
            return datetime.strptime(text.strip(), date_format).date()
        except ValueError:
            pass
    raise ValueError(f"unknown date format: {text!r}")


def parse_amount(value):
    if isinstance(value, (int, float)):
        return float(value)
    return float(value.replace("$", "").replace(",", "").strip())


def name(text):
    return " ".join(text.split()).title()


orders = {}
for row in rows:
    if row["order_number"] in orders:
        continue  # exported twice
    orders[row["order_number"]] = {
        "date": parse_date(row["order_date"]),
        "region": name(row["region"]),
        "product": name(row["product"]),
        "amount": parse_amount(row["amount"]),
    }

by_region = defaultdict(lambda: {"orders": 0, "revenue": 0.0})
by_month = defaultdict(lambda: defaultdict(float))
for order in orders.values():
    by_region[order["region"]]["orders"] += 1
    by_region[order["region"]]["revenue"] += order["amount"]
    by_month[order["date"].strftime("%Y-%m")][order["region"]] += order["amount"]

text_amounts = sum(isinstance(row["amount"], str) for row in rows)
spellings = len({row["region"] for row in rows})
print(f"{len(rows):,} rows, {len(rows) - len(orders)} duplicates dropped: {len(orders):,} orders")
print(f"cleaned: {spellings} spellings of {len(by_region)} regions, 3 date formats, {text_amounts} amounts stored as text")
print()
print(f"{'region':<8}{'orders':>8}{'revenue':>14}{'share':>8}")
total = sum(region["revenue"] for region in by_region.values())
for region, figures in sorted(by_region.items(), key=lambda item: -item[1]["revenue"]):
    print(f"{region:<8}{figures['orders']:>8,}{figures['revenue']:>14,.2f}{figures['revenue'] / total:>8.0%}")
print(f"{'total':<8}{len(orders):>8,}{total:>14,.2f}")

months = sorted(by_month)
monthly = {month: sum(by_month[month].values()) for month in months}
best = max(months, key=monthly.get)
worst = min(months, key=monthly.get)
print()
print(f"best month {best}: {monthly[best]:,.2f}; weakest {worst}: {monthly[worst]:,.2f}")
first_half = sum(monthly[month] for month in months[:6])
second_half = sum(monthly[month] for month in months[6:])
print(f"second half vs first half: {second_half / first_half - 1:+.0%}")

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    print("no chart: matplotlib is not installed for this interpreter")
else:
    figure, axes = plt.subplots(figsize=(8, 4.5))
    bottom = [0.0] * len(months)
    for region in sorted(by_region):
        values = [by_month[month][region] for month in months]
        axes.bar([month[5:] for month in months], values, bottom=bottom, label=region)
        bottom = [low + value for low, value in zip(bottom, values)]
    axes.set_title("Revenue per month, 2024, by region")
    axes.set_xlabel("month")
    axes.set_ylabel("revenue")
    axes.legend()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    plt.close(figure)
    save_artifact("revenue-by-month.png", buffer.getvalue())
    print("chart: revenue-by-month.png")
