"""ember quickstart: fit a tiny two-layer network with plain eager autograd.

Run:  python examples/quickstart.py
"""

import ember as torch               # ember mirrors the torch API
import ember.nn as nn
import ember.nn.functional as F

torch.manual_seed(0)

# data: y = 3*x0 - 2*x1 + 1 plus a little noise
x = torch.randn(64, 2)
y = (3 * x[:, 0] - 2 * x[:, 1] + 1).unsqueeze(1) + 0.01 * torch.randn(64, 1)

model = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

for step in range(1, 21):
    optimizer.zero_grad()
    loss = F.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    if step == 1 or step % 5 == 0:
        print(f"step {step:2d}  loss {loss.item():.4f}")

# the autograd graph behind the last loss
print("loss:", loss)
print("loss.grad_fn:", loss.grad_fn)
print("next_functions:", loss.grad_fn.next_functions)
print("first-layer weight grad:\n", model[0].weight.grad[:2])

# the same model compiled: dynamo captures it, aot builds forward + backward
# graphs, and the inductor turns them into fused C++ kernels
compiled = torch.compile(model)
loss_c = F.mse_loss(compiled(x), y)
loss_c.backward()
print("compiled loss:", f"{loss_c.item():.4f}", " eager loss:", f"{F.mse_loss(model(x), y).item():.4f}")
print("compiled loss.grad_fn:", loss_c.grad_fn)
explanation = torch.dynamo.explain(model)(x)
print(f"graphs: {explanation.graph_count}, graph breaks: {explanation.graph_break_count}")
