"""Makes sales.db, the messy order export the analysis example reads. Standard library only, seeded: the same file
contents every time.

    python3 generate_sales_db.py [PATH]   write the database (default: sales.db beside this file)
    python3 generate_sales_db.py --truth  print, as JSON, the figures a correct cleaning must find

The orders are made clean first (3,000 orders of 2024, amounts in cents); the export then spoils them the way
real exports do: region and product names in inconsistent case and spacing, dates in three formats (one per sales
channel's system), about a fifth of the amounts stored as text ("1,204.50", "$89.90", " 45.00 "), and 150 orders
exported twice (the second copy formatted differently, with an id of its own).
"""
import json
import os
import random
import sqlite3
import sys
from datetime import date, timedelta

SEED = 20240101
ORDER_COUNT = 3000
DUPLICATE_COUNT = 150
FIRST_DAY = date(2024, 1, 1)
DAYS = 366

REGIONS = [("North", 0.34), ("South", 0.22), ("East", 0.26), ("West", 0.18)]
PRODUCTS = [("Widget", 1999), ("Gadget", 3450), ("Gizmo", 1225), ("Sprocket", 780), ("Flux Capacitor", 12900)]
# Each sales channel's system writes dates its own way.
CHANNELS = [("web", "%Y-%m-%d", 0.55), ("store", "%d/%m/%Y", 0.30), ("phone", "%d %b %Y", 0.15)]
MONTH_ABBREVIATIONS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

SCHEMA = """
CREATE TABLE orders (
    id INTEGER PRIMARY KEY,
    order_number TEXT NOT NULL,
    order_date TEXT NOT NULL,
    channel TEXT NOT NULL,
    region TEXT NOT NULL,
    product TEXT NOT NULL,
    quantity INTEGER NOT NULL,
    amount
)
"""


def weighted(rng, choices):
    """One value of [(value, weight), ...]; the weights need not sum to 1."""
    threshold = rng.random() * sum(weight for _, weight in choices)
    for value, weight in choices:
        threshold -= weight
        if threshold < 0:
            return value
    return choices[-1][0]


def clean_orders(rng):
    """The orders as they really were: dicts with amount_cents, sorted by date."""
    orders = []
    # Sales grow through the year and peak before Christmas: a day's weight is its month's.
    month_weights = [0.70, 0.62, 0.80, 0.85, 0.90, 0.88, 0.84, 0.86, 0.98, 1.05, 1.45, 1.60]
    days = [(FIRST_DAY + timedelta(days=offset)) for offset in range(DAYS)]
    day_choices = [(day, month_weights[day.month - 1]) for day in days]
    for _ in range(ORDER_COUNT):
        product, unit_cents = weighted(rng, [(product, 1.0) for product in PRODUCTS])
        quantity = weighted(rng, [(1, 0.5), (2, 0.25), (3, 0.12), (5, 0.08), (10, 0.05)])
        orders.append(
            {
                "order_date": weighted(rng, day_choices),
                "channel": weighted(rng, [((name, fmt), weight) for name, fmt, weight in CHANNELS]),
                "region": weighted(rng, REGIONS),
                "product": product,
                "quantity": quantity,
                "amount_cents": unit_cents * quantity,
            }
        )
    orders.sort(key=lambda order: order["order_date"])
    for number, order in enumerate(orders, start=10001):
        order["order_number"] = f"SO-{number}"
    return orders


def messy_name(rng, name):
    """The name in the case and spacing some clerk or system typed it."""
    shape = rng.random()
    if shape < 0.55:
        text = name
    elif shape < 0.70:
        text = name.lower()
    elif shape < 0.82:
        text = name.upper()
    else:
        text = name.replace(" ", "  ")
    padding = rng.random()
    if padding < 0.12:
        text = " " + text
    elif padding < 0.24:
        text = text + " "
    elif padding < 0.28:
        text = "  " + text + "  "
    return text


def date_text(day, fmt):
    if fmt == "%d %b %Y":
        # Written out here so the file does not depend on the locale of the machine that makes it.
        return f"{day.day:02d} {MONTH_ABBREVIATIONS[day.month - 1]} {day.year}"
    return day.strftime(fmt)


def messy_amount(rng, cents):
    """The amount as a number (most rows) or as text in one of three shapes."""
    shape = rng.random()
    whole, fraction = divmod(cents, 100)
    if shape < 0.80:
        return cents / 100
    if shape < 0.88:
        return f"{whole:,}.{fraction:02d}"
    if shape < 0.95:
        return f"${whole:,}.{fraction:02d}"
    return f" {whole}.{fraction:02d} "


def exported_row(rng, order):
    channel, fmt = order["channel"]
    return (
        order["order_number"],
        date_text(order["order_date"], fmt),
        channel,
        messy_name(rng, order["region"]),
        messy_name(rng, order["product"]),
        order["quantity"],
        messy_amount(rng, order["amount_cents"]),
    )


def exported_rows(rng, orders):
    """The export: every order once, and DUPLICATE_COUNT of them again a few rows later."""
    rows = [exported_row(rng, order) for order in orders]
    duplicated = sorted(rng.sample(range(len(orders)), DUPLICATE_COUNT))
    for index in reversed(duplicated):
        rows.insert(min(index + 1 + rng.randrange(20), len(rows)), exported_row(rng, orders[index]))
    return rows


def truth(orders):
    """What a correct cleaning finds, computed from the clean orders."""
    by_region = {}
    by_month = {}
    for order in orders:
        region = by_region.setdefault(order["region"], {"orders": 0, "revenue_cents": 0})
        region["orders"] += 1
        region["revenue_cents"] += order["amount_cents"]
        month = order["order_date"].strftime("%Y-%m")
        by_month[month] = by_month.get(month, 0) + order["amount_cents"]
    return {
        "orders": len(orders),
        "revenue_cents": sum(order["amount_cents"] for order in orders),
        "by_region": dict(sorted(by_region.items())),
        "by_month_cents": dict(sorted(by_month.items())),
    }


def write_database(path, rows):
    temporary = path + ".tmp"
    if os.path.exists(temporary):
        os.remove(temporary)
    connection = sqlite3.connect(temporary)
    connection.execute(SCHEMA)
    connection.executemany(
        "INSERT INTO orders (order_number, order_date, channel, region, product, quantity, amount)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    connection.commit()
    connection.execute("VACUUM")
    connection.close()
    os.replace(temporary, path)


def main(arguments):
    rng = random.Random(SEED)
    orders = clean_orders(rng)
    if arguments == ["--truth"]:
        print(json.dumps(truth(orders), indent=2))
        return
    if len(arguments) > 1 or (arguments and arguments[0].startswith("-")):
        sys.exit(__doc__)
    path = arguments[0] if arguments else os.path.join(os.path.dirname(os.path.abspath(__file__)), "sales.db")
    rows = exported_rows(rng, orders)
    write_database(path, rows)
    print(f"{path}: {len(rows)} rows")


if __name__ == "__main__":
    main(sys.argv[1:])
