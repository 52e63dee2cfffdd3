export interface Order { id: string; user: string; amount: number }

export function findOrder(id: string, user: string): Order {
  return { id, user, amount: 1250 };
}
