"""The password of the Redis that ops/ runs, for ops/lib/common.sh:

    .venv/bin/python ops/redis_auth.py password   # on stdout, for REDISCLI_AUTH=$(...)
    .venv/bin/python ops/redis_auth.py config     # a requirepass line, for redis-server's stdin

It is ENGRAM_REDIS_PASSWORD when set; else the data folder's secrets/redis.password, made on
first use (0600) and reused after, which every process then reads through shared/settings/.
The shell keeps it in a variable and hands it over on stdin or in the environment, so it never
appears on a command line.
"""

from __future__ import annotations

import argparse
import sys

from pydantic import SecretStr

from shared import secrets
from shared.redis_client import requirepass_line
from shared.settings import Settings


def password(settings: Settings) -> SecretStr:
    if settings.redis_password is not None:
        return settings.redis_password
    return secrets.ensure(settings.redis_password_file)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("what", choices=["password", "config"])
    args = parser.parse_args(argv)
    # The secret's place depends on the data folder alone. Read as development settings, so that
    # ENGRAM_ENV=production does not refuse the missing password this is about to make.
    secret = password(Settings(env="development"))
    sys.stdout.write(requirepass_line(secret) if args.what == "config" else secret.get_secret_value())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
