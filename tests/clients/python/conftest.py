"""web3.py against a running simnode dev node, over HTTP and over WebSocket.

Run by ../run.sh, which starts `target/release/simnode node --dev` and passes
SIMNODE_HTTP_URL (http://127.0.0.1:PORT/v3/KEY) and SIMNODE_WS_URL (ws://.../ws/v3/KEY).
"""

import asyncio
import inspect
import json
import os
import pathlib
from types import SimpleNamespace

import pytest
from eth_account import Account
from web3 import AsyncWeb3, Web3
from web3.middleware import SignAndSendRawMiddlewareBuilder
from web3.providers import LegacyWebSocketProvider, WebSocketProvider
from web3.utils.address import get_create_address

HTTP_URL = os.environ.get("SIMNODE_HTTP_URL")
WS_URL = os.environ.get("SIMNODE_WS_URL")

CONTRACTS = json.loads(
    (pathlib.Path(__file__).resolve().parent.parent / "contracts.json").read_text()
)

# Dev accounts 2 and 3 of the test mnemonic (the JS suite uses 4 and 5); 10,000 ETH each.
SENDER = Account.from_key(
    "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a"
)
SIMULATOR = Account.from_key(
    "0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6"
)
TEN_THOUSAND_ETH = 10_000 * 10**18


def word(n: int) -> bytes:
    return n.to_bytes(32, "big")


def pytest_configure(config):
    if not HTTP_URL or not WS_URL:
        raise pytest.UsageError(
            "SIMNODE_HTTP_URL and SIMNODE_WS_URL must point at a simnode dev node "
            "(tests/clients/run.sh sets them)"
        )


@pytest.fixture(scope="session")
def chain():
    """Sends the suite's own transactions once: a transfer, a deployment, an event call."""
    w3 = Web3(Web3.HTTPProvider(HTTP_URL, request_kwargs={"timeout": 30}))
    w3.middleware_onion.inject(SignAndSendRawMiddlewareBuilder.build(SENDER), layer=0)
    assert w3.eth.chain_id == 1337
    assert w3.eth.get_balance(SIMULATOR.address) == TEN_THOUSAND_ETH, (
        "the simulating account must be untouched (fresh dev chain)"
    )

    def send(tx):
        tx_hash = w3.eth.send_transaction({"from": SENDER.address, **tx})
        receipt = w3.eth.wait_for_transaction_receipt(tx_hash, timeout=30, poll_latency=0.1)
        assert receipt["status"] == 1, receipt
        return tx_hash, receipt

    recipient = Account.create().address
    transfer_value = Web3.to_wei(1.25, "ether")
    transfer_hash, transfer = send({"to": recipient, "value": transfer_value})

    deploy_nonce = w3.eth.get_transaction_count(SENDER.address)
    deploy_hash, deploy = send({"data": CONTRACTS["storeInitCode"]})
    contract = get_create_address(SENDER.address, deploy_nonce)

    call_hash, call = send({"to": contract, "data": Web3.to_hex(word(42))})

    # Three transactions in one block: store(100), a transfer, store(101). Sent with the nonces
    # in reverse so that the first two wait in the pool behind a nonce gap and all three become
    # executable together when the lowest arrives.
    nonce = w3.eth.get_transaction_count(SENDER.address)
    batch_recipient = Account.create().address
    common = {"chainId": 1337, "maxFeePerGas": 20 * 10**9, "maxPriorityFeePerGas": 10**9}
    batch = [
        {"nonce": nonce, "to": contract, "data": word(100), "gas": 100_000, "value": 0},
        {"nonce": nonce + 1, "to": batch_recipient, "value": 7, "gas": 21_000},
        {"nonce": nonce + 2, "to": contract, "data": word(101), "gas": 100_000, "value": 0},
    ]
    raws = [SENDER.sign_transaction({**common, **tx}).raw_transaction for tx in batch]
    batch_hashes = [None] * 3
    for i in (2, 1, 0):
        batch_hashes[i] = w3.eth.send_raw_transaction(raws[i])
    batch_receipts = [
        w3.eth.wait_for_transaction_receipt(h, timeout=30, poll_latency=0.1) for h in batch_hashes
    ]
    assert len({r["blockNumber"] for r in batch_receipts}) == 1, (
        "the dev miner should put the three transactions released together into one block"
    )
    assert all(r["status"] == 1 for r in batch_receipts), batch_receipts

    return SimpleNamespace(
        recipient=recipient,
        transfer_value=transfer_value,
        transfer_hash=transfer_hash,
        transfer=transfer,
        deploy_hash=deploy_hash,
        deploy=deploy,
        contract=contract,
        call_hash=call_hash,
        call=call,
        batch_recipient=batch_recipient,
        batch_hashes=batch_hashes,
        batch=batch_receipts,
        stored=101,
        head=w3.eth.block_number,
    )


class Client:
    """One web3.py client; `run(lambda w3: ...)` returns the result whether the API is
    sync (Web3) or async (AsyncWeb3), so that one test body serves every transport."""

    def __init__(self, name):
        self.name = name
        self.loop = None
        if name == "http":
            self.w3 = Web3(Web3.HTTPProvider(HTTP_URL, request_kwargs={"timeout": 30}))
        elif name == "ws":
            self.loop = asyncio.new_event_loop()
            self.w3 = self.loop.run_until_complete(AsyncWeb3(WebSocketProvider(WS_URL)))
        elif name == "ws-legacy":
            self.w3 = Web3(LegacyWebSocketProvider(WS_URL))
        else:
            raise ValueError(name)

    def run(self, fn):
        out = fn(self.w3)
        if inspect.isawaitable(out):
            out = self.loop.run_until_complete(out)
        return out

    def close(self):
        if self.loop is not None:
            self.loop.run_until_complete(self.w3.provider.disconnect())
            self.loop.close()


@pytest.fixture(scope="module", params=["http", "ws", "ws-legacy"])
def client(request, chain):
    c = Client(request.param)
    try:
        assert c.run(lambda w3: w3.eth.chain_id) == 1337
        yield c
    finally:
        c.close()
