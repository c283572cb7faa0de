"""First look at the sales database: what the model runs before it writes the analysis."""
from tools.sales import describe, query

print({column["name"]: column["type"] for column in describe("orders")["columns"]})
print(query("SELECT count(*) AS rows, count(DISTINCT order_number) AS orders, sum(amount) AS revenue FROM orders")["rows"])
for row in query("SELECT * FROM orders LIMIT 4")["rows"]:
    print(row)
print(query("SELECT typeof(amount) AS type, count(*) AS rows FROM orders GROUP BY 1")["rows"])
regions = query("SELECT region, count(*) AS orders FROM orders GROUP BY region")["rows"]
print(len(regions), "spellings of region, e.g.", [row["region"] for row in regions[:8]])
