"""What a web3.py user checks: receipts of the suite's own transactions, eth_simulateV1
results, and raw trace_callMany answers; each test runs over HTTP, WebSocket
(AsyncWeb3 + WebSocketProvider) and the legacy sync WebSocket provider."""

from eth_account import Account
from eth_account.messages import encode_defunct
from eth_utils import keccak, to_checksum_address
from hexbytes import HexBytes
from web3 import Web3

from conftest import CONTRACTS, HTTP_URL, SENDER, SIMULATOR, TEN_THOUSAND_ETH, word

ZERO_BLOOM = HexBytes(b"\x00" * 256)
STORED_TOPIC = HexBytes(CONTRACTS["storedTopic"])
# ERC-7528: native transfers reported as logs of this pseudo-token under traceTransfers.
ETH_PSEUDO_TOKEN = "0xEeeeeEeeeEeEeeEeEeEeeEEEeeeeEeeeeeeeEEeE"
TRANSFER_TOPIC = HexBytes(keccak(text="Transfer(address,address,uint256)"))
STORED_ABI = [
    {
        "type": "event",
        "name": "Stored",
        "anonymous": False,
        "inputs": [
            {"name": "sender", "type": "address", "indexed": True},
            {"name": "value", "type": "uint256", "indexed": False},
        ],
    }
]


def addr_topic(address: str) -> HexBytes:
    return HexBytes(b"\x00" * 12 + HexBytes(address))


def test_block_receipts_transfer(client, chain):
    receipts = client.run(lambda w3: w3.eth.get_block_receipts(chain.transfer["blockNumber"]))
    assert len(receipts) == 1
    r = receipts[0]
    assert r["transactionHash"] == chain.transfer_hash
    assert r["status"] == 1
    assert r["type"] == 2
    assert r["from"] == SENDER.address
    assert r["to"] == chain.recipient
    assert r["gasUsed"] == 21000
    assert r["cumulativeGasUsed"] == 21000
    assert r["contractAddress"] is None
    assert r["logs"] == []
    assert r["logsBloom"] == ZERO_BLOOM
    assert r["transactionIndex"] == 0
    assert r["blockNumber"] == chain.transfer["blockNumber"]

    block = client.run(lambda w3: w3.eth.get_block(chain.transfer["blockNumber"]))
    assert r["blockHash"] == block["hash"]
    assert r["effectiveGasPrice"] >= block["baseFeePerGas"] > 0
    assert r == client.run(lambda w3: w3.eth.get_transaction_receipt(chain.transfer_hash))
    assert client.run(lambda w3: w3.eth.get_balance(chain.recipient)) == chain.transfer_value


def test_block_receipts_deployment_by_hash(client, chain):
    receipts = client.run(lambda w3: w3.eth.get_block_receipts(chain.deploy["blockHash"]))
    assert len(receipts) == 1
    r = receipts[0]
    assert r["transactionHash"] == chain.deploy_hash
    assert r["status"] == 1
    assert r["to"] is None
    assert r["contractAddress"] == chain.contract
    assert r["gasUsed"] > 53000
    assert r["logs"] == []
    code = client.run(lambda w3: w3.eth.get_code(chain.contract))
    assert code == HexBytes(CONTRACTS["storeRuntime"])


def test_block_receipts_event(client, chain):
    receipts = client.run(lambda w3: w3.eth.get_block_receipts(chain.call["blockNumber"]))
    assert len(receipts) == 1
    r = receipts[0]
    assert r["status"] == 1
    assert r["to"] == chain.contract
    assert r["logsBloom"] != ZERO_BLOOM
    assert len(r["logs"]) == 1
    log = r["logs"][0]
    assert log["address"] == chain.contract
    assert log["topics"] == [STORED_TOPIC, addr_topic(SENDER.address)]
    assert log["data"] == HexBytes(word(42))
    assert log["logIndex"] == 0
    assert log["transactionIndex"] == 0
    assert log["transactionHash"] == chain.call_hash
    assert log["blockHash"] == r["blockHash"]
    assert log["blockNumber"] == chain.call["blockNumber"]
    assert log["removed"] is False

    event = Web3().eth.contract(abi=STORED_ABI).events.Stored().process_log(log)
    assert event["args"]["sender"] == SENDER.address
    assert event["args"]["value"] == 42
    assert r == client.run(lambda w3: w3.eth.get_transaction_receipt(chain.call_hash))
    slot0 = client.run(
        lambda w3: w3.eth.get_storage_at(chain.contract, 0, chain.call["blockNumber"])
    )
    assert slot0 == HexBytes(word(42))


def test_block_receipts_three_transactions(client, chain):
    number = chain.batch[0]["blockNumber"]
    receipts = client.run(lambda w3: w3.eth.get_block_receipts(number))
    assert [r["transactionHash"] for r in receipts] == chain.batch_hashes
    assert [r["transactionIndex"] for r in receipts] == [0, 1, 2]
    assert [r["status"] for r in receipts] == [1, 1, 1]
    assert receipts[1]["gasUsed"] == 21000
    assert receipts[0]["cumulativeGasUsed"] == receipts[0]["gasUsed"]
    assert receipts[1]["cumulativeGasUsed"] == receipts[0]["gasUsed"] + 21000
    assert receipts[2]["cumulativeGasUsed"] == receipts[1]["cumulativeGasUsed"] + receipts[2]["gasUsed"]
    # Log indexes count through the block, not per transaction.
    assert [[log["logIndex"] for log in r["logs"]] for r in receipts] == [[0], [], [1]]
    assert receipts[0]["logs"][0]["data"] == HexBytes(word(100))
    assert receipts[2]["logs"][0]["data"] == HexBytes(word(101))
    assert receipts[2]["logs"][0]["transactionIndex"] == 2
    assert receipts[2]["logs"][0]["transactionHash"] == chain.batch_hashes[2]
    block = client.run(lambda w3: w3.eth.get_block(number))
    assert list(block["transactions"]) == chain.batch_hashes
    assert block["gasUsed"] == receipts[2]["cumulativeGasUsed"]
    assert all(r["blockHash"] == block["hash"] for r in receipts)
    assert receipts == chain.batch
    assert client.run(lambda w3: w3.eth.get_balance(chain.batch_recipient)) == 7


def test_simulate_v1(client, chain):
    fresh = Account.create().address
    balance_of = Account.create().address
    value = Web3.to_wei(2, "ether")
    payload = {
        "blockStateCalls": [
            {
                "calls": [
                    {"from": SIMULATOR.address, "to": fresh, "value": value},
                    {"from": SIMULATOR.address, "to": chain.contract, "data": word(7)},
                ]
            },
            {
                "stateOverrides": {balance_of: {"code": CONTRACTS["balanceOfRuntime"]}},
                "calls": [
                    {"from": SIMULATOR.address, "to": balance_of, "data": b"\x00" * 12 + HexBytes(fresh)},
                    {"from": SIMULATOR.address, "to": balance_of, "data": b"\x00" * 12 + HexBytes(SIMULATOR.address)},
                    {"from": SIMULATOR.address, "to": chain.contract, "data": word(0)},
                ],
            },
        ],
        "traceTransfers": True,
    }
    blocks = client.run(lambda w3: w3.eth.simulate_v1(payload, "latest"))
    head = client.run(lambda w3: w3.eth.get_block(chain.head))

    assert len(blocks) == 2
    assert blocks[0]["number"] == chain.head + 1
    assert blocks[1]["number"] == chain.head + 2
    assert blocks[0]["parentHash"] == head["hash"]
    assert blocks[1]["parentHash"] == blocks[0]["hash"]
    assert blocks[1]["timestamp"] - blocks[0]["timestamp"] == 12

    transfer, store = blocks[0]["calls"]
    assert transfer["status"] == 1
    assert transfer["gasUsed"] == 21000
    assert transfer["returnData"] == HexBytes(b"")
    # traceTransfers: the ETH movement shows up as an ERC-7528 Transfer log.
    assert len(transfer["logs"]) == 1
    tlog = transfer["logs"][0]
    assert tlog["address"] == ETH_PSEUDO_TOKEN
    assert tlog["topics"] == [TRANSFER_TOPIC, addr_topic(SIMULATOR.address), addr_topic(fresh)]
    assert tlog["data"] == HexBytes(word(value))

    assert store["status"] == 1
    assert store["returnData"] == HexBytes(word(7))
    assert len(store["logs"]) == 1
    assert store["logs"][0]["address"] == chain.contract
    assert store["logs"][0]["topics"] == [STORED_TOPIC, addr_topic(SIMULATOR.address)]
    assert store["logs"][0]["data"] == HexBytes(word(7))
    assert blocks[0]["gasUsed"] == transfer["gasUsed"] + store["gasUsed"]

    # Block 2 sees block 1's state. Without validation no fee is charged (base fee 0).
    fresh_balance, sim_balance, revert = blocks[1]["calls"]
    assert fresh_balance["status"] == 1
    assert int.from_bytes(fresh_balance["returnData"], "big") == value
    assert int.from_bytes(sim_balance["returnData"], "big") == TEN_THOUSAND_ETH - value
    assert revert["status"] == 0
    assert revert["returnData"] == HexBytes(b"")
    assert revert["error"]["code"] == 3
    assert revert["logs"] == []

    # Nothing reached the chain.
    assert client.run(lambda w3: w3.eth.get_balance(fresh)) == 0
    assert client.run(lambda w3: w3.eth.get_balance(SIMULATOR.address)) == TEN_THOUSAND_ETH
    assert client.run(lambda w3: w3.eth.get_storage_at(chain.contract, 0)) == HexBytes(word(chain.stored))
    assert client.run(lambda w3: w3.eth.block_number) == chain.head


def test_trace_call_many_raw(client, chain):
    fresh = Account.create().address
    value = Web3.to_wei(0.5, "ether")
    params = [
        [
            [{"from": SIMULATOR.address, "to": fresh, "value": hex(value)}, ["trace"]],
            [
                {"from": SIMULATOR.address, "to": chain.contract, "data": Web3.to_hex(word(9))},
                ["trace", "stateDiff"],
            ],
        ],
        "latest",
    ]
    response = client.run(lambda w3: w3.provider.make_request("trace_callMany", params))
    assert "error" not in response, response
    out = response["result"]
    assert len(out) == 2
    t0, t1 = out

    assert t0["output"] == "0x"
    assert t0["stateDiff"] is None
    assert t0["vmTrace"] is None
    assert len(t0["trace"]) == 1
    call = t0["trace"][0]
    assert call["type"] == "call"
    assert call["traceAddress"] == []
    assert call["subtraces"] == 0
    assert call["action"]["callType"] == "call"
    assert to_checksum_address(call["action"]["from"]) == SIMULATOR.address
    assert to_checksum_address(call["action"]["to"]) == fresh
    assert int(call["action"]["value"], 16) == value
    assert call["action"]["input"] == "0x"
    assert call["result"] == {"gasUsed": "0x0", "output": "0x"}

    w9 = Web3.to_hex(word(9))
    assert t1["output"] == w9
    assert len(t1["trace"]) == 1
    assert to_checksum_address(t1["trace"][0]["action"]["to"]) == chain.contract
    assert t1["trace"][0]["action"]["input"] == w9
    assert t1["trace"][0]["result"]["output"] == w9
    assert int(t1["trace"][0]["result"]["gasUsed"], 16) > 0
    diff = {to_checksum_address(k): v for k, v in t1["stateDiff"].items()}
    assert diff[chain.contract]["storage"] == {
        Web3.to_hex(word(0)): {"*": {"from": Web3.to_hex(word(chain.stored)), "to": w9}}
    }
    assert diff[chain.contract]["balance"] == "="
    # The first call was committed before the second: the nonce goes 1 -> 2.
    assert diff[SIMULATOR.address]["nonce"] == {"*": {"from": "0x1", "to": "0x2"}}

    assert client.run(lambda w3: w3.eth.get_storage_at(chain.contract, 0)) == HexBytes(word(chain.stored))
    assert client.run(lambda w3: w3.eth.get_balance(fresh)) == 0


# Dev account 7, which no other test uses: a dev node holds its key and signs for it, as
# geth --dev does, so web3.py's send_transaction and sign need no local key.
NODE_ACCOUNT = "0x14dC79964da2C08b23698B3D3cc7Ca32193d9955"


def test_node_signs_for_its_account():
    w3 = Web3(Web3.HTTPProvider(HTTP_URL, request_kwargs={"timeout": 30}))
    assert NODE_ACCOUNT in w3.eth.accounts
    recipient = Account.create().address
    tx_hash = w3.eth.send_transaction({"from": NODE_ACCOUNT, "to": recipient, "value": 4321})
    receipt = w3.eth.wait_for_transaction_receipt(tx_hash, timeout=20, poll_latency=0.1)
    assert receipt["status"] == 1
    assert receipt["from"] == NODE_ACCOUNT
    assert w3.eth.get_balance(recipient) == 4321
    text = "signed by the node"
    signature = w3.eth.sign(NODE_ACCOUNT, text=text)
    assert Account.recover_message(encode_defunct(text=text), signature=signature) == NODE_ACCOUNT
