"""Batch demo: list ~100 status reports, read them all in parallel through the tools, print one summary table.

The model would write a script like this in one turn; only the table below returns to it, not the 100 files.
"""
import asyncio
from collections import defaultdict

from tools import aio, list_files

listing = list_files("data", pattern="*.txt")
paths = [f"data/{entry['name']}" for entry in listing["entries"] if entry["type"] == "file"]


async def read_all():
    return await asyncio.gather(*(aio.read_file(path) for path in paths))


totals = defaultdict(lambda: {"reports": 0, "done": 0, "in progress": 0, "blocked": 0, "hours": 0, "words": 0})
for document in asyncio.run(read_all()):
    header, _, body = document["content"].partition("\n\n")
    fields = dict(line.split(": ", 1) for line in header.splitlines())
    row = totals[fields["team"]]
    row["reports"] += 1
    row[fields["status"]] += 1
    row["hours"] += int(fields["hours"])
    row["words"] += len(body.split())

columns = ["reports", "done", "in progress", "blocked", "hours", "words"]
print(f"{'team':<10}" + "".join(f"{column:>13}" for column in columns))
for team in sorted(totals):
    print(f"{team:<10}" + "".join(f"{totals[team][column]:>13}" for column in columns))
print(f"{'total':<10}" + "".join(f"{sum(row[column] for row in totals.values()):>13}" for column in columns))
print(f"\n{len(paths)} reports read with {len(paths) + 1} tool calls")
