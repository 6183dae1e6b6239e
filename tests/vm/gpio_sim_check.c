/* Reads one line of a GPIO chip through the character device (uAPI v2), the way the daemon's
 * trigger input will: prints "label=<label> lines=<n> value=<0|1>". */
#include <fcntl.h>
#include <linux/gpio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: gpio_sim_check /dev/gpiochipN LINE\n");
    return 2;
  }
  int fd = open(argv[1], O_RDONLY | O_CLOEXEC);
  if (fd < 0) { perror(argv[1]); return 1; }
  struct gpiochip_info info;
  memset(&info, 0, sizeof info);
  if (ioctl(fd, GPIO_GET_CHIPINFO_IOCTL, &info) < 0) { perror("GPIO_GET_CHIPINFO_IOCTL"); return 1; }
  struct gpio_v2_line_request req;
  memset(&req, 0, sizeof req);
  req.offsets[0] = (unsigned)atoi(argv[2]);
  req.num_lines = 1;
  req.config.flags = GPIO_V2_LINE_FLAG_INPUT;
  strcpy(req.consumer, "gpio_sim_check");
  if (ioctl(fd, GPIO_V2_GET_LINE_IOCTL, &req) < 0) { perror("GPIO_V2_GET_LINE_IOCTL"); return 1; }
  struct gpio_v2_line_values values = {.bits = 0, .mask = 1};
  if (ioctl(req.fd, GPIO_V2_LINE_GET_VALUES_IOCTL, &values) < 0) { perror("GPIO_V2_LINE_GET_VALUES_IOCTL"); return 1; }
  printf("label=%s lines=%u value=%d\n", info.label, info.lines, (int)(values.bits & 1));
  close(req.fd);
  close(fd);
  return 0;
}
