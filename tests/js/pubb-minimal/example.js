const channel = "notifications";
const url = new URL("wss://ws.pubb.io/socket");
url.searchParams.set("appKey", "YOUR_APP_KEY");
url.searchParams.set("protocol", "2");
const socket = new WebSocket(url);

socket.onmessage = ({ data }) => {
  try {
    const packet = JSON.parse(data);
    if (packet.event === "pubb:connection_established") {
      const { socket_id } = JSON.parse(packet.data);
      console.log("Connected", socket_id);
      socket.send(JSON.stringify({ action: "subscribe", channel }));
      return;
    }
    if (packet.event === "error" || packet.event === "subscription_error") {
      console.error(packet.event, packet.channel, packet.data);
      return;
    }
    if (packet.channel !== channel) return;
    if (packet.event === "pubb:subscription_succeeded") {
      console.log("Ready to receive events");
      return;
    }
    if (packet.event) return; // Other control events
    const event = JSON.parse(packet.data);
    console.log(event.name, event.data);
  } catch (error) {
    console.error("Could not read the packet", error);
  }
};

socket.onerror = () => console.error("WebSocket connection failed");
socket.onclose = ({ code, reason }) => console.log("Disconnected", code, reason);

function unsubscribe() {
  if (socket.readyState === WebSocket.OPEN) {
    socket.send(JSON.stringify({ action: "unsubscribe", channel }));
  }
}

// On component/page disposal, stop any reconnect timers and close the socket:
function dispose() {
  socket.close(1000, "Client disposed");
}
