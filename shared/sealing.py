"""Webhook signing secrets sealed at rest: a copy of Neo4j's store files alone cannot sign.

A key's signing secret must be read back to check a signature (an HMAC needs the secret, not a
hash of it), so Neo4j keeps it sealed with Fernet (AES-128-CBC + HMAC-SHA256, ``cryptography``)
under a key that lives outside the store: ``ENGRAM_SIGNING_KEY``, else
``<data_dir>/secrets/signing.key`` (made on first use, 0600 in a 0700 folder, as the Redis
password is). A sealed value reads ``sealed:v1:<token>``; a value stored before sealing is read
as it is and sealed again when ``engram keys rotate`` gives the key a new secret.
"""

from __future__ import annotations

import base64
import hashlib

from cryptography.fernet import Fernet, InvalidToken

from shared import secrets
from shared.errors import ConfigurationError
from shared.settings import Settings

SEALED = "sealed:v1:"
SIGNING_KEY_FILE = "signing.key"


class SecretBox:
    def __init__(self, key: str) -> None:
        # Any secret text makes a Fernet key: 32 bytes of its SHA-256, as Fernet wants them.
        self._fernet = Fernet(base64.urlsafe_b64encode(hashlib.sha256(key.encode()).digest()))

    def seal(self, plain: str) -> str:
        return SEALED + self._fernet.encrypt(plain.encode()).decode()

    def open(self, stored: str) -> str:
        if not stored.startswith(SEALED):
            return stored  # stored before sealing: rotate the key's secret to seal it
        try:
            return self._fernet.decrypt(stored.removeprefix(SEALED).encode()).decode()
        except InvalidToken as exc:
            raise ConfigurationError(
                "a signing secret in Neo4j was sealed with another key than ENGRAM_SIGNING_KEY "
                "(or secrets/signing.key): restore that key, or rotate the API key's secret"
            ) from exc


def box_for(settings: Settings) -> SecretBox:
    if settings.signing_key is not None:
        return SecretBox(settings.signing_key.get_secret_value())
    path = settings.data_dir / secrets.SECRETS_FOLDER / SIGNING_KEY_FILE
    return SecretBox(secrets.ensure(path).get_secret_value())
