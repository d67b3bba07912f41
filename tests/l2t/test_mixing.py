import numpy as np

from preschool.l2t.mixing import TokenRouter, route_by_documents, row_order, share_profile


def test_document_routing_ratio_and_purity():
    routes = [route_by_documents(0, i, 0.25) for i in range(4000)]
    share = routes.count("raw") / len(routes)
    assert 0.22 < share < 0.28
    assert routes == [route_by_documents(0, i, 0.25) for i in range(4000)]
    assert set(route_by_documents(0, i, 0.0) for i in range(50)) == {"l2t"}
    assert set(route_by_documents(0, i, 1.0) for i in range(50)) == {"raw"}


def test_token_router_hits_target():
    r = TokenRouter(0.3)
    rng = np.random.default_rng(0)
    for _ in range(2000):
        raw = int(rng.integers(50, 500))
        r.route(raw, 2 * raw)
    assert abs(r.raw / (r.raw + r.l2t) - 0.3) < 0.01


def test_row_order_shuffle_is_permutation():
    o = row_order(30, 70, seed=21)
    assert sorted(o.tolist()) == list(range(100))
    assert (o == row_order(30, 70, seed=21)).all()


def test_curriculum_front_loads_l2t():
    o = row_order(500, 500, seed=1, curriculum=[1.0, 0.0])
    assert sorted(o.tolist()) == list(range(1000))
    prof = share_profile(o, 500)
    assert prof[0] > 0.85 and prof[-1] < 0.15
    assert all(a >= b - 1e-9 for a, b in zip(prof, prof[1:]))
